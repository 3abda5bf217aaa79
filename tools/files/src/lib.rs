//! Built-in file tools: `read_file`, `write_file`, `edit_file` and `diff_file`,
//! confined to the granted workspace by the host's WASI preopens.

pub mod diff;
pub mod edit;
pub mod ledger;
pub mod read;
pub mod replace;
pub mod write;

use turnstone_plugin_sdk::register_tools;

register_tools!(
    read::ReadFile,
    write::WriteFile,
    edit::EditFile,
    diff::DiffFile
);
