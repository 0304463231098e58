//! The README quotes `pktsched sim` tables; each quoted row must be a row
//! of the committed snapshot of the same scenario (a row cut short with
//! `...` must match the snapshot row's beginning), so the two cannot drift.

use std::path::Path;

/// (scenario file stem, quoted rows) for every `sim examples/scenarios/X.toml`
/// command in the README followed by a table.
fn quoted_tables(readme: &str) -> Vec<(String, Vec<String>)> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.split("sim examples/scenarios/").nth(1) else {
            continue;
        };
        let Some(stem) = rest.split(".toml").next() else {
            continue;
        };
        // The next fenced block after the command's own block.
        let mut fences = 0;
        let mut rows = Vec::new();
        for l in &lines[i + 1..] {
            if l.starts_with("```") {
                fences += 1;
                if fences == 3 {
                    break;
                }
                continue;
            }
            if fences == 2 && !l.starts_with("group ") && !l.trim().is_empty() {
                rows.push(l.trim_end().to_string());
            }
        }
        if !rows.is_empty() {
            out.push((stem.to_string(), rows));
        }
    }
    out
}

#[test]
fn readme_tables_are_rows_of_the_snapshots() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let tables = quoted_tables(&readme);
    assert!(tables.len() >= 2, "the README's sim tables were not found");
    for (stem, rows) in tables {
        let snap = root.join(format!(
            "crates/sim/tests/snapshots/scenarios__{}.snap",
            stem.replace('-', "_")
        ));
        let text = std::fs::read_to_string(&snap).unwrap_or_else(|e| panic!("{snap:?}: {e}"));
        let snap_rows: Vec<&str> = text.lines().map(str::trim_end).collect();
        for row in rows {
            let found = match row.split_once("...") {
                Some((head, _)) => snap_rows.iter().any(|s| s.starts_with(head.trim_end())),
                None => snap_rows.contains(&row.as_str()),
            };
            assert!(found, "README row for {stem} is not in {snap:?}:\n{row}");
        }
    }
}
