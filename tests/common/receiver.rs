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

use serde_json::Value;

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
