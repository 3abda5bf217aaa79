//! A stored project for memory-index tests: a workstream in project
//! [`PROJECT`], a memory of that project and one of another.

use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// The project of the workstream [`project_workstream`] creates.
pub const PROJECT: &str = "p1";
/// The other project, whose memory that workstream must not list.
pub const OTHER_PROJECT: &str = "p2";
/// The name of [`PROJECT`]'s memory.
pub const PROJECT_MEMORY: &str = "p1_deploys";
/// The index line of [`PROJECT`]'s memory.
pub const PROJECT_MEMORY_LINE: &str = "- p1_deploys (reference, project): how p1 ships";
/// The name of [`OTHER_PROJECT`]'s memory.
pub const OTHER_PROJECT_MEMORY: &str = "p2_notes";

/// Creates and publishes a workstream of `user_id` in [`PROJECT`], and saves
/// one project memory in each of [`PROJECT`] and [`OTHER_PROJECT`]; returns
/// the workstream's id.
pub async fn project_workstream(db: &Storage, user_id: Option<String>) -> String {
    let r = db
        .create_workstream(&NewWorkstream {
            user_id,
            name: "site".into(),
            project_id: Some(PROJECT.into()),
            ..Default::default()
        })
        .await
        .expect("create the workstream");
    db.publish_workstream(&r)
        .await
        .expect("publish the workstream");
    for (name, project) in [
        ("p1_deploys", PROJECT),
        (OTHER_PROJECT_MEMORY, OTHER_PROJECT),
    ] {
        db.save_memory(&NewMemory {
            name: name.into(),
            description: format!("how {project} ships"),
            memory_type: Some("reference".into()),
            scope: Some("project".into()),
            scope_id: project.into(),
            content: "steps".into(),
        })
        .await
        .expect("save a project memory");
    }
    r.ws_id
}
