//! A notification receiver on 127.0.0.1: a plain HTTP/1.1 server on a thread that answers each
//! POST as its script says (refuse with 503, or hang up without an answer after reading it:
//! "processed, but the answer was lost"), then 200, and keeps every request it read.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    Operator,
    eru::{items, time},
    ledger::slot_records,
};

/// How the receiver answers one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `503 Service Unavailable`.
    Refuse,
    /// Read it whole, then close the connection without a word.
    HangUp,
    /// Read it whole (it counts as received at once), answer 200 four seconds later: a sender
    /// killed meanwhile never learns it was taken.
    Slow,
    /// `200 OK`.
    Accept,
}

/// A request the receiver read, and how it answered.
#[derive(Clone, Debug)]
pub struct Received {
    pub answer: Answer,
    pub body: String,
    pub json: Value,
    /// The `X-Eru-Signature` header.
    pub signature: Option<String>,
    /// When it was read.
    pub at: DateTime<Utc>,
}

pub struct Receiver {
    pub port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Listens on `port` (retrying the bind for 5 s) and answers the first requests per `script`,
    /// every later one with 200.
    pub fn start(port: u16, script: &[Answer]) -> Self {
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(l) => break l,
                Err(e) if Instant::now() > deadline => panic!("the receiver cannot listen on {port}: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        listener.set_nonblocking(true).unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (received, stop, mut script) = (received.clone(), stop.clone(), script.to_vec());
            script.reverse();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let answer = script.last().copied().unwrap_or(Answer::Accept);
                            if let Some((request, stream)) = read(stream, answer) {
                                script.pop();
                                received.lock().unwrap().push(request);
                                reply(stream, answer);
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        };
        Self {
            port,
            received,
            stop,
            thread: Some(thread),
        }
    }

    /// Every request read so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request from `stream` (to be answered `answer`); `None` if it was not one.
fn read(stream: TcpStream, answer: Answer) -> Option<(Received, TcpStream)> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let (mut length, mut signature) = (0usize, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().ok()?,
                "x-eru-signature" => signature = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = String::from_utf8(body).ok()?;
    let request = Received {
        answer,
        json: serde_json::from_str(&body).unwrap_or(Value::Null),
        body,
        signature,
        at: Utc::now(),
    };
    Some((request, stream))
}

/// Answers a request read from `stream`.
fn reply(mut stream: TcpStream, answer: Answer) {
    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    match answer {
        Answer::Refuse => {
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
        Answer::Accept => {
            let _ = stream.write_all(OK);
        }
        Answer::Slow => {
            std::thread::sleep(Duration::from_secs(4));
            let _ = stream.write_all(OK);
        }
        Answer::HangUp => {}
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A receiver that reads every request and never answers (each connection held for 30 s, on a
/// thread of its own): slower than the operator's send timeout. Returns how many it read.
pub fn stalling(port: u16) -> Arc<std::sync::atomic::AtomicUsize> {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                let held = read(stream, Answer::HangUp);
                if held.is_some() {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_secs(30));
                drop(held);
            });
        }
    });
    requests
}

/// How long each event `received` waited from its journaling (its `at`) to its first arrival,
/// in seconds, for events of the Eru `name` and `event` only.
pub fn latencies(received: &[Received], name: &str, event: &str) -> Vec<f64> {
    let mut first: BTreeMap<String, f64> = BTreeMap::new();
    for r in received.iter().filter(|r| r.json["eru"]["name"] == name) {
        for e in r.json["events"].as_array().into_iter().flatten() {
            if e["event"] != event {
                continue;
            }
            let journaled = time(&e["at"]);
            let waited = (r.at - journaled).num_milliseconds() as f64 / 1000.0;
            first
                .entry(e["key"].as_str().unwrap().to_string())
                .or_insert(waited);
        }
    }
    first.into_values().collect()
}

/// The journal's time text of `slot` (a notification key's slot).
fn key_time(slot: DateTime<Utc>) -> String {
    slot.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// The notifications the journal says are owed for the Eru `name` of `ns`, as the docs define
/// them: a key per slot record not fired, and per restart that ended (succeeded, failed,
/// abandoned).
pub fn owed(operator: &Operator, ns: &str, name: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for r in slot_records(operator, name).unwrap() {
        if r.result != "fired" {
            keys.insert(format!("{ns}/{name}/{}/slot_{}", key_time(r.slot), r.result));
        }
    }
    for r in items(operator, &format!("/history?name={name}&limit=1000")) {
        let outcome = r["outcome"].as_str().unwrap_or_default();
        if ["succeeded", "failed", "abandoned"].contains(&outcome) {
            keys.insert(format!(
                "{ns}/{name}/{}/restart_{outcome}",
                key_time(time(&r["slot"]))
            ));
        }
    }
    keys
}

/// The keys the receiver took (answered 200).
pub fn delivered(received: &[Received]) -> BTreeSet<String> {
    (received.iter())
        .filter(|r| r.answer == Answer::Accept)
        .flat_map(|r| r.json["events"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["key"].as_str().map(str::to_string))
        .collect()
}

/// Checks what the receiver read against the events `owed`: every request signed with `secret`
/// (HMAC-SHA256 of the body), every owed event taken, no event that is not owed, and the copies
/// of one event alike. Returns the copies by key.
pub fn verify(received: &[Received], owed: &BTreeSet<String>, secret: &[u8]) -> BTreeMap<String, Vec<Value>> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut copies: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in received {
        let given = r
            .signature
            .as_deref()
            .and_then(|s| s.strip_prefix("sha256="))
            .expect("signed");
        let given: Vec<u8> = (0..given.len() / 2)
            .map(|i| u8::from_str_radix(&given[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        ring::hmac::verify(&key, r.body.as_bytes(), &given).expect("the signature verifies");
        for e in r.json["events"].as_array().unwrap() {
            let key = e["key"].as_str().unwrap().to_string();
            assert!(
                owed.contains(&key),
                "{key} was sent but the journal has no such event: {owed:?}"
            );
            copies.entry(key).or_default().push(e.clone());
        }
    }
    for (key, sent) in &copies {
        assert!(
            sent.iter().all(|e| e == &sent[0]),
            "copies of {key} differ: {sent:?}"
        );
    }
    let taken = delivered(received);
    let missing: Vec<&String> = owed.difference(&taken).collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
    copies
}

/// Writes `n` pending notifications for `sink` into the outbox of `operator`'s journal (stopped or
/// not), spread over `erus` Erus named `<prefix>-<i>` in `ns`, written and due now: the backlog a
/// long outage of the receiver leaves.
pub async fn backlog(operator: &Operator, ns: &str, sink: &str, (n, erus): (u32, u32), prefix: &str) {
    sqlx::any::install_default_drivers();
    let url = match &operator.database_url {
        Some(url) => url.clone(),
        None => format!("sqlite://{}", operator.database.display()),
    };
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let now = key_time(Utc::now());
    let sql = format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n})
         INSERT INTO notifications (sink, key, uid, namespace, name, event, slot, last_slot, slot_count,
           reason, created_at, next_attempt_at)
         SELECT '{sink}', '{ns}/{prefix}-' || (i % {erus}) || '/' || i || '/slot_skipped',
           '{prefix}-uid-' || (i % {erus}), '{ns}', '{prefix}-' || (i % {erus}), 'slot_skipped',
           '{now}', '{now}', 1, 'suspended', '{now}', '{now}' FROM n"
    );
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(done.rows_affected(), u64::from(n));
    let _ = sqlx::Connection::close(conn).await;
}
