//! `--event-log`: every protocol event the sessions of this process emit,
//! one `WsEvent` JSON per line, in emission order. The same engine drives
//! the REPL and the server, so their logs of one scripted conversation can be
//! compared line by line; it is also the raw record a replay harness reads.

use crate::events::{EventSink, SessionEvent};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use turnstone_protocol::{WsEvent, wire};

/// An append-only JSON-lines log, written on its own thread so emitting an
/// event never waits for the disk.
#[derive(Clone)]
pub struct EventLog {
    tx: mpsc::Sender<String>,
}

impl EventLog {
    /// Creates (truncating) the log at `path`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(path)?;
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::Builder::new()
            .name("event-log".into())
            .spawn(move || {
                let mut out = std::io::LineWriter::new(file);
                for line in rx {
                    if writeln!(out, "{line}").is_err() {
                        // A full disk loses the log, never the session.
                        break;
                    }
                }
            })?;
        Ok(Self { tx })
    }

    /// Records `event` of workstream `ws_id`.
    pub fn record(&self, ws_id: Option<&str>, event: &turnstone_protocol::Event) {
        let line = wire::to_json(&WsEvent {
            ws_id: ws_id.map(String::from),
            event: event.clone(),
        });
        let _ = self.tx.send(line);
    }

    /// `sink` with every event it emits also recorded here, before it is
    /// delivered.
    pub fn tap(&self, sink: EventSink, ws_id: Option<String>) -> EventSink {
        let log = self.clone();
        sink.inspect(move |e| {
            if let SessionEvent::Wire(ev) = e {
                log.record(ws_id.as_deref(), ev);
            }
        })
    }
}
