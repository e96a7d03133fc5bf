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
                            if let Some(request) = serve(stream, answer) {
                                script.pop();
                                received.lock().unwrap().push(request);
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

/// Reads one request from `stream` and answers it; `None` if it was not one.
fn serve(stream: TcpStream, answer: Answer) -> Option<Received> {
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
    let mut stream = stream;
    match answer {
        Answer::Refuse => {
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
        Answer::Accept => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
        Answer::HangUp => {}
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    Some(Received {
        answer,
        json: serde_json::from_str(&body).unwrap_or(Value::Null),
        body,
        signature,
    })
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
