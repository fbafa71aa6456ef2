//! The README's configuration table is the one in `config.rs` (KNOBS): every knob has its row
//! with the same YAML key and default.

#[test]
fn readme_documents_every_knob() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    for k in dftracer_core::config::KNOBS {
        let row = format!("| `{}` | `{}` | `{}` |", k.env, k.yaml, k.default);
        assert!(readme.contains(&row), "README.md lacks the row: {row}");
    }
}
