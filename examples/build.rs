//! Makes a test of every Rust block in README.md and docs/*.md (`tests/doc_blocks.rs` includes
//! what this writes). A block is preceded by `<!-- check: rust CONTEXT -->`, an HTML comment a
//! reader does not see, naming the file in `doc_blocks/` that gives the block what its prose
//! takes for granted (the handlers, a client, a running server) and the test that runs it. A
//! Rust block without one fails the build: no example in the docs goes unchecked.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

/// Where a context file takes its block.
const MARKER: &str = "/* the block */";

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    println!("cargo::rerun-if-changed=doc_blocks");
    println!("cargo::rerun-if-changed={}", root.join("docs").display());

    let mut out = String::new();
    for page in &pages {
        println!("cargo::rerun-if-changed={}", page.display());
        let text = fs::read_to_string(page).expect("a page");
        let name = page
            .strip_prefix(&root)
            .expect("under the root")
            .display()
            .to_string();
        for (line, context, code) in rust_blocks(&text, &name) {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("doc_blocks")
                .join(format!("{context}.rs"));
            let wrapper = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{name}:{line}: no context {}: {e}", path.display()));
            assert!(
                wrapper.contains(MARKER),
                "{} has no {MARKER}",
                path.display()
            );
            let module = format!(
                "{}_{line}",
                name.replace(['/', '.', '-'], "_").to_lowercase()
            );
            let _ = writeln!(
                out,
                "/// {name}, line {line}, in `doc_blocks/{context}.rs`.\n\
                 #[allow(unused, clippy::all)]\nmod {module} {{\n{}\n}}",
                wrapper.replace(MARKER, &code)
            );
        }
    }
    let target = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("doc_blocks.rs");
    fs::write(target, out).expect("writing doc_blocks.rs");
}

/// Each Rust block of `text`: the line of its opening fence, its context, its code.
fn rust_blocks(text: &str, page: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let fence = lines[at].trim_start();
        if !fence.starts_with("```") {
            at += 1;
            continue;
        }
        let end = (at + 1..lines.len())
            .find(|&i| lines[i].trim_start().starts_with("```"))
            .unwrap_or_else(|| panic!("{page}:{}: a block that never closes", at + 1));
        if fence.trim_start_matches('`').trim() == "rust" {
            let directive = at
                .checked_sub(1)
                .map(|i| lines[i].trim())
                .unwrap_or_default();
            let context = directive
                .strip_prefix("<!-- check: rust ")
                .and_then(|rest| rest.strip_suffix("-->"))
                .map(str::trim)
                .unwrap_or_else(|| {
                    panic!(
                        "{page}:{}: a Rust block needs `<!-- check: rust CONTEXT -->` above it",
                        at + 1
                    )
                });
            blocks.push((at + 1, context.to_owned(), lines[at + 1..end].join("\n")));
        }
        at = end + 1;
    }
    blocks
}
