//! The README's key table is the keymap's: regenerate it from the defaults and compare.

use flightdeck::tui::action::Context;
use flightdeck::tui::keymap::Keymap;

fn key_table() -> String {
    let mut out = String::new();
    for ctx in Context::ALL {
        out.push_str(&format!(
            "\n**{}** (`{}`)\n\n| keys | action | does |\n|---|---|---|\n",
            ctx.title(),
            ctx.name()
        ));
        for b in Keymap::defaults().bindings().iter().filter(|b| b.context == ctx) {
            let keys: Vec<String> = b.chords.iter().map(|c| format!("`{c}`")).collect();
            out.push_str(&format!(
                "| {} | `{}` | {} |\n",
                keys.join(" "),
                b.action.name(),
                b.action.description()
            ));
        }
    }
    out
}

#[test]
fn readme_key_table_matches_the_keymap() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let begin = "<!-- keys:begin -->\n";
    let end = "<!-- keys:end -->";
    let start = readme.find(begin).expect("keys:begin marker") + begin.len();
    let stop = readme.find(end).expect("keys:end marker");
    let expected = key_table();
    if readme[start..stop] != expected {
        if std::env::var_os("FLIGHTDECK_UPDATE_README").is_some() {
            let updated = format!("{}{}{}", &readme[..start], expected, &readme[stop..]);
            std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"), updated).unwrap();
        } else {
            panic!(
                "README.md's key table is stale; run with FLIGHTDECK_UPDATE_README=1. Expected:\n{expected}"
            );
        }
    }
}
