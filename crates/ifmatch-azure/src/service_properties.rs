//! A storage service's properties (`<StorageServiceProperties>`: logging, metrics, CORS), as
//! Set Service Properties changes them: an element the request leaves out keeps its setting,
//! as Azure's reference says, so a client that sets only its CORS rules keeps the rest.

use quick_xml::events::Event;

use crate::cors::Cors;

/// The properties `old` (none: nothing set) changed by `new`, a Set Service Properties body:
/// each element of `new` replaces the one of that name in `old`, the others stay. An error
/// says why `new` is refused (no `<StorageServiceProperties>`, not XML, CORS rules past their
/// limits).
pub fn merge(old: Option<&str>, new: &str) -> Result<String, String> {
    let changed = elements(new)?;
    Cors::of_properties(new)?;
    let mut out =
        String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties>");
    let kept = old.map(elements).transpose()?.unwrap_or_default();
    for (name, text) in &kept {
        if !changed.iter().any(|(changed, _)| changed == name) {
            out.push_str(text);
        }
    }
    for (_, text) in &changed {
        out.push_str(text);
    }
    out.push_str("</StorageServiceProperties>");
    Ok(out)
}

/// The elements directly inside `<StorageServiceProperties>`, each its name and its text.
fn elements(xml: &str) -> Result<Vec<(Vec<u8>, &str)>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut depth = 0usize;
    let mut root = false;
    let mut found = Vec::new();
    let mut start = 0;
    loop {
        let before = reader.buffer_position() as usize;
        let event = reader.read_event().map_err(|e| format!("not XML: {e}"))?;
        let after = reader.buffer_position() as usize;
        match event {
            Event::Start(e) => {
                if depth == 0 {
                    root = e.local_name().as_ref() == b"StorageServiceProperties";
                    if !root {
                        break;
                    }
                } else if depth == 1 {
                    start = before;
                }
                depth += 1;
            }
            Event::Empty(e) if depth == 1 => {
                found.push((e.local_name().as_ref().to_vec(), &xml[before..after]));
            }
            Event::Empty(e) if depth == 0 => {
                root = e.local_name().as_ref() == b"StorageServiceProperties";
                break;
            }
            Event::End(e) => {
                depth -= 1;
                if depth == 1 {
                    found.push((e.local_name().as_ref().to_vec(), &xml[start..after]));
                }
            }
            Event::Eof if depth > 0 => return Err("the properties' XML is cut".to_owned()),
            Event::Eof => break,
            _ => {}
        }
    }
    match root {
        true => Ok(found),
        false => Err("the properties are <StorageServiceProperties>".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_request_leaves_out_keeps_its_setting() {
        let old = "<StorageServiceProperties><Logging><Read>true</Read></Logging><Cors /></StorageServiceProperties>";
        let new = "<?xml version=\"1.0\"?><StorageServiceProperties><Cors><CorsRule>\
            <AllowedOrigins>*</AllowedOrigins><AllowedMethods>GET</AllowedMethods>\
            <MaxAgeInSeconds>1</MaxAgeInSeconds><ExposedHeaders/><AllowedHeaders/></CorsRule>\
            </Cors></StorageServiceProperties>";
        let merged = merge(Some(old), new).unwrap();
        assert!(
            merged.contains("<Logging><Read>true</Read></Logging>"),
            "{merged}"
        );
        assert!(
            merged.contains("<AllowedOrigins>*</AllowedOrigins>"),
            "{merged}"
        );
        assert!(!merged.contains("<Cors />"), "{merged}");
        assert_eq!(Cors::of_properties(&merged).unwrap().rules.len(), 1);
        assert!(merge(None, "<Other/>").is_err());
        assert!(merge(None, "<StorageServiceProperties><Cors>").is_err());
        assert!(merge(None, "<StorageServiceProperties/>").is_ok());
    }
}
