//! Debug mode: slow callbacks and slow task polls are reported through `tracing` (target
//! `eddy::slow_callback`) with where they were scheduled; a non-debug runtime stays silent.
//! The default exception handler logs through `tracing` too.
//!
//! A small capturing `tracing` subscriber is installed as the global default (so that it sees
//! events of the worker threads); this file is its own test binary, so it affects nothing
//! else. Tests here run in parallel and share it: each looks only at events that name its own
//! source lines.

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use eddy::Builder;
use eddy_tests::{quiet_expected_panics, wait_until, with_deadline, EXPECTED, PATIENCE};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

#[derive(Debug, Clone)]
struct Captured {
    target: String,
    level: Level,
    /// All fields, `name=value`, space separated (the message as `message=...`).
    fields: String,
}

#[derive(Default)]
struct Capture {
    events: Mutex<Vec<Captured>>,
}

struct FieldText<'a>(&'a mut String);

impl Visit for FieldText<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, "{}={} ", field.name(), value);
    }
}

struct CaptureSubscriber(Arc<Capture>);

impl Subscriber for CaptureSubscriber {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = String::new();
        event.record(&mut FieldText(&mut fields));
        self.0.events.lock().unwrap().push(Captured {
            target: event.metadata().target().to_string(),
            level: *event.metadata().level(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Arc<Capture>> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let c = Arc::new(Capture::default());
        tracing::subscriber::set_global_default(CaptureSubscriber(c.clone()))
            .expect("no other global subscriber in this test binary");
        c
    })
}

/// Events of `target` whose fields mention `needle`.
fn events_mentioning(target: &str, needle: &str) -> Vec<Captured> {
    capture()
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.target == target && e.fields.contains(needle))
        .cloned()
        .collect()
}

fn here(line: u32) -> String {
    format!("{}:{line}:", file!())
}

/// Debug mode with a 20 ms threshold: a callback that sleeps 60 ms is reported once, as a
/// warning on `eddy::slow_callback`, with the file and line of its `call_soon` and the time it
/// took.
#[test]
fn slow_callback_is_reported_in_debug_mode() {
    capture();
    let slow_line = with_deadline(PATIENCE, || {
        let rt = Builder::new()
            .workers(2)
            .debug(true)
            .slow_callback_duration(Duration::from_millis(20))
            .build()
            .unwrap();
        let slow_line = rt.block_on(async {
            let (tx, rx) = async_channel::bounded(1);
            let slow_line = line!() + 1;
            eddy::call_soon(move || {
                std::thread::sleep(Duration::from_millis(60));
                tx.try_send(()).unwrap();
            });
            rx.recv().await.unwrap();
            slow_line
        });
        // The report is written after the callback returns; once the workers are gone,
        // every report is in.
        drop(rt);
        slow_line
    });
    let slow = here(slow_line);
    let reports = events_mentioning("eddy::slow_callback", &slow);
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r.level, Level::WARN);
    assert!(
        r.fields.contains("Executing callback scheduled at"),
        "{r:?}"
    );
    assert!(r.fields.contains("seconds="), "{r:?}");
}

/// In debug mode a callback that returns within the threshold is not reported: the same
/// 60 ms callback as above, under a threshold longer than the whole test may take.
#[test]
fn a_callback_within_the_threshold_is_not_reported() {
    capture();
    let line = with_deadline(PATIENCE, || {
        let rt = Builder::new()
            .workers(2)
            .debug(true)
            .slow_callback_duration(PATIENCE * 2)
            .build()
            .unwrap();
        let line = rt.block_on(async {
            let (tx, rx) = async_channel::bounded(1);
            let line = line!() + 1;
            eddy::call_soon(move || {
                std::thread::sleep(Duration::from_millis(60));
                tx.try_send(()).unwrap();
            });
            rx.recv().await.unwrap();
            line
        });
        drop(rt);
        line
    });
    let at = here(line);
    assert!(
        events_mentioning("eddy::slow_callback", &at).is_empty(),
        "a callback within the threshold was reported as slow"
    );
}

/// Debug mode also reports a slow task poll, with where the task was spawned.
#[test]
fn slow_task_poll_is_reported_in_debug_mode() {
    capture();
    let line = with_deadline(PATIENCE, || {
        let rt = Builder::new()
            .workers(1)
            .debug(true)
            .slow_callback_duration(Duration::from_millis(20))
            .build()
            .unwrap();
        let line = line!() + 1;
        let t = rt.handle().spawn(async {
            std::thread::sleep(Duration::from_millis(60));
        });
        rt.block_on(t).unwrap();
        drop(rt);
        line
    });
    let at = here(line);
    let reports = events_mentioning("eddy::slow_callback", &at);
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].fields.contains("Executing task scheduled at"),
        "{:?}",
        reports[0]
    );
}

/// Without debug mode nothing is reported, however slow the callback.
#[test]
fn no_report_without_debug_mode() {
    capture();
    let line = with_deadline(PATIENCE, || {
        let rt = Builder::new()
            .workers(2)
            .debug(false)
            .slow_callback_duration(Duration::from_millis(20))
            .build()
            .unwrap();
        let line = rt.block_on(async {
            let (tx, rx) = async_channel::bounded(1);
            let line = line!() + 1;
            eddy::call_soon(move || {
                std::thread::sleep(Duration::from_millis(60));
                tx.try_send(()).unwrap();
            });
            rx.recv().await.unwrap();
            line
        });
        drop(rt);
        line
    });
    let at = here(line);
    assert!(
        events_mentioning("eddy::slow_callback", &at).is_empty(),
        "a non-debug runtime reported a slow callback"
    );
}

/// The default exception handler logs a panicking callback at error level, with the message,
/// the panic text and the call site.
#[test]
fn default_exception_handler_logs_through_tracing() {
    capture();
    quiet_expected_panics();
    with_deadline(PATIENCE, || {
        let rt = Builder::new().workers(1).debug(false).build().unwrap();
        let h = rt.handle();
        let line = line!() + 1;
        h.call_soon_threadsafe(|| panic!("{EXPECTED} logged"))
            .unwrap();
        let at = here(line);
        assert!(
            wait_until(PATIENCE, || {
                capture().events.lock().unwrap().iter().any(|e| {
                    e.level == Level::ERROR
                        && e.fields.contains("Exception in callback")
                        && e.fields.contains(&at)
                        && e.fields.contains("logged")
                })
            }),
            "no error event for the panicking callback"
        );
    });
}
