//! Test-only component exporting `turnstone:plugin/tool@0.3.0`.

wit_bindgen::generate!({ world: "tool-plugin", path: "wit" });

struct Future;

impl exports::turnstone::plugin::tool::Guest for Future {
    fn describe() -> Vec<String> {
        vec!["from-the-future".into()]
    }
}

export!(Future);
