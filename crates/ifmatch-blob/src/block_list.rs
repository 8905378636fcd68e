//! The block list of the dialect: the body of Put Block List, which blocks it names, and the
//! body of Get Block List. Pure rules; the operations are in the front.
//!
//! A block blob is staged a block at a time (Put Block: each block an object of its own,
//! listed in the blob's record as uncommitted) and made visible by one Put Block List, which
//! names the blocks in order. The committed blob is those objects one after the other: nothing
//! is copied at commit time.

use quick_xml::events::Event;

use crate::error_code::ErrorCode;
use crate::operation::BlockListType;
use crate::record::Block;
use crate::record::Record;

/// The most blocks a committed blob has (the dialect's limit).
pub(crate) const MAX_COMMITTED: usize = 50_000;
/// The most uncommitted blocks a blob has at once (the dialect's limit).
pub(crate) const MAX_UNCOMMITTED: usize = 100_000;
/// The largest Put Block List body: 50,000 entries of the longest id fit in it.
pub(crate) const MAX_LIST_BODY: usize = 8 << 20;
/// How long an uncommitted block is kept without a commit (the dialect's week).
pub(crate) const UNCOMMITTED_TTL: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Where Put Block List looks for a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `<Latest>`: the uncommitted block of that id, else the committed one.
    Latest,
    /// `<Committed>`: the committed block of that id.
    Committed,
    /// `<Uncommitted>`: the uncommitted block of that id.
    Uncommitted,
}

/// Reads a Put Block List body: `<BlockList>` and, in order, `<Latest>`, `<Committed>` and
/// `<Uncommitted>` elements, each holding a block id.
pub(crate) fn parse(xml: &[u8]) -> Result<Vec<(Source, String)>, ErrorCode> {
    let invalid = ErrorCode::InvalidXmlDocument;
    let mut reader = quick_xml::Reader::from_reader(xml);
    reader.config_mut().trim_text(true);
    let (mut opened, mut closed) = (false, false);
    let mut entry: Option<(Source, String)> = None;
    let mut out = Vec::new();
    loop {
        match reader.read_event().map_err(|_| invalid)? {
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
            Event::Empty(e) if !opened && e.local_name().as_ref() == b"BlockList" => {
                (opened, closed) = (true, true);
            }
            Event::Start(e) if !opened => {
                if e.local_name().as_ref() != b"BlockList" {
                    return Err(invalid);
                }
                opened = true;
            }
            Event::Start(e) if !closed && entry.is_none() => {
                let source = match e.local_name().as_ref() {
                    b"Latest" => Source::Latest,
                    b"Committed" => Source::Committed,
                    b"Uncommitted" => Source::Uncommitted,
                    _ => return Err(invalid),
                };
                entry = Some((source, String::new()));
            }
            Event::Text(text) => match &mut entry {
                Some((_, id)) => id.push_str(&text.decode().map_err(|_| invalid)?),
                None => return Err(invalid),
            },
            Event::End(_) if !closed => match entry.take() {
                Some(done) => out.push(done),
                None => closed = true,
            },
            Event::Eof if closed => return Ok(out),
            _ => return Err(invalid),
        }
    }
}

/// The blocks a parsed list names, looked up in the blob's `committed` blocks and its
/// `uncommitted` ones ([`latest`]). A block that is not there answers 400 `InvalidBlockList`,
/// as does a list longer than the dialect allows.
pub(crate) fn resolve(
    list: &[(Source, String)],
    committed: &[Block],
    uncommitted: &[Block],
) -> Result<Vec<Block>, ErrorCode> {
    if list.len() > MAX_COMMITTED {
        return Err(ErrorCode::BlockCountExceedsLimit);
    }
    let index = |blocks: &[Block]| -> std::collections::HashMap<String, Block> {
        blocks.iter().map(|b| (b.id.clone(), b.clone())).collect()
    };
    let (committed, uncommitted) = (index(committed), index(uncommitted));
    list.iter()
        .map(|(source, id)| {
            match source {
                Source::Latest => uncommitted.get(id).or_else(|| committed.get(id)),
                Source::Committed => committed.get(id),
                Source::Uncommitted => uncommitted.get(id),
            }
            .cloned()
            .ok_or(ErrorCode::InvalidBlockList)
        })
        .collect()
}

/// The uncommitted blocks of a blob from what was staged, in order (`entries`): a block
/// staged again under an id replaces the earlier one and moves to where it was staged last.
pub(crate) fn latest(entries: Vec<Block>) -> Vec<Block> {
    let mut last = std::collections::HashMap::with_capacity(entries.len());
    for (at, block) in entries.iter().enumerate() {
        last.insert(block.id.clone(), at);
    }
    (entries.into_iter().enumerate())
        .filter(|(at, block)| last[&block.id] == *at)
        .map(|(_, block)| block)
        .collect()
}

/// The blob's committed blocks (none for a blob put whole, or no blob).
pub(crate) fn committed(record: Option<&Record>) -> &[Block] {
    record
        .and_then(|r| r.content.as_ref())
        .map_or(&[], |c| &c.blocks)
}

/// Whether `id` may join the blob's blocks: every block id of a blob has the same length.
pub(crate) fn id_fits(record: Option<&Record>, id: &str) -> bool {
    let Some(record) = record else { return true };
    let staged = record.staging.iter().map(|s| s.id_len);
    let listed = committed(Some(record)).iter().chain(&record.uncommitted);
    (listed.map(|b| b.id.len()))
        .chain(staged)
        .all(|len| len == id.len())
}

/// The body of Get Block List.
pub(crate) fn list_xml(committed: &[Block], uncommitted: &[Block], kind: BlockListType) -> String {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
    let section = |xml: &mut String, name: &str, blocks: &[Block]| {
        xml.push_str(&format!("<{name}>"));
        for block in blocks {
            // Ids are base64: nothing in them needs escaping.
            xml.push_str(&format!(
                "<Block><Name>{}</Name><Size>{}</Size></Block>",
                block.id, block.len
            ));
        }
        xml.push_str(&format!("</{name}>"));
    };
    if kind != BlockListType::Uncommitted {
        section(&mut xml, "CommittedBlocks", committed);
    }
    if kind != BlockListType::Committed {
        section(&mut xml, "UncommittedBlocks", uncommitted);
    }
    xml.push_str("</BlockList>");
    xml
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_list_reads_in_order_and_rejects_what_is_not_one() {
        let xml = br#"<?xml version="1.0" encoding="utf-8"?>
            <BlockList>
              <Latest>QUFB</Latest>
              <Committed> QkJC </Committed>
              <Uncommitted>Q0ND</Uncommitted>
            </BlockList>"#;
        assert_eq!(
            parse(xml),
            Ok(vec![
                (Source::Latest, "QUFB".into()),
                (Source::Committed, "QkJC".into()),
                (Source::Uncommitted, "Q0ND".into()),
            ])
        );
        assert_eq!(parse(b"<BlockList/>"), Ok(vec![]));
        assert_eq!(parse(b"<BlockList></BlockList>"), Ok(vec![]));
        for bad in [
            &b""[..],
            b"<BlockList>",
            b"<BlockList><Other>QUFB</Other></BlockList>",
            b"<List><Latest>QUFB</Latest></List>",
            b"<BlockList><Latest><Latest>QUFB</Latest></Latest></BlockList>",
            b"<BlockList>QUFB</BlockList>",
            b"<BlockList></BlockList><BlockList></BlockList>",
        ] {
            assert_eq!(
                parse(bad),
                Err(ErrorCode::InvalidXmlDocument),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
