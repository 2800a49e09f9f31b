//! A small synchronous HTTP/1.1 server: one thread per connection (at most
//! `max_connections`), every read and write under a timeout, and at most
//! `workers` requests worked on at once.
//!
//! Written here rather than taken from a library because the server must
//! bound slow and idle clients: a connection that stalls while sending its
//! head or body times out (408), an idle keep-alive connection is closed,
//! and a burst of connections never leaves one of them waiting behind the
//! others.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Transport bounds.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Time to receive a request head, from its first byte.
    pub head_timeout: Duration,
    /// Time to receive a request body.
    pub body_timeout: Duration,
    /// How long an idle keep-alive connection stays open.
    pub idle_timeout: Duration,
    /// Time to write a response.
    pub write_timeout: Duration,
    /// Largest request head (request line and headers).
    pub max_head_bytes: usize,
    /// Most header lines.
    pub max_headers: usize,
    /// Largest body read (larger ones are answered without reading).
    pub max_body_bytes: u64,
    /// Most open connections; more are answered 503 and closed.
    pub max_connections: usize,
    /// Most requests worked on at once.
    pub workers: usize,
}

/// One parsed request.
#[derive(Debug)]
pub struct HttpRequest {
    /// Method, as sent.
    pub method: String,
    /// Request target (path and query).
    pub target: String,
    /// Header fields in order (names as sent).
    pub headers: Vec<(String, String)>,
    /// The body (empty without one).
    pub body: Vec<u8>,
    /// The peer.
    pub peer: SocketAddr,
    /// `HTTP/1.1` or `HTTP/1.0`, as sent.
    pub version: &'static str,
    /// Whether the client asked to keep the connection open (its
    /// `Connection` header, else the default of its HTTP version).
    pub keep_alive: bool,
    /// Set while the handler runs once the client has closed its
    /// connection (see [`ClientWatch`]): the work can stop, nobody will
    /// read the answer.
    pub gone: Arc<AtomicBool>,
}

impl HttpRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A response to write.
#[derive(Debug)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header fields (no Content-Length, Connection or Date: added here).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// A body produced while it is sent (chunked transfer coding) instead
    /// of `body`.
    pub stream: Option<BodyStream>,
}

impl HttpResponse {
    /// A response with a complete body.
    pub fn new(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        HttpResponse {
            status,
            headers,
            body,
            stream: None,
        }
    }
}

/// Writes a streamed body. Each write is sent to the client at once as one
/// chunk; an error returned ends the connection without the final chunk, so
/// the client sees an incomplete response.
pub struct BodyStream(pub Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()> + Send>);

impl std::fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BodyStream")
    }
}

/// Chunked transfer coding over the connection (or the bytes as they are,
/// for HTTP/1.0), or a writer that fails (the head could not be sent).
struct Chunked<'a> {
    stream: &'a TcpStream,
    chunked: bool,
    failed: Option<std::io::ErrorKind>,
}

impl Write for Chunked<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(kind) = self.failed {
            return Err(std::io::Error::new(kind, "the client connection failed"));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if !self.chunked {
            let mut s = self.stream;
            s.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut frame = format!("{:x}\r\n", buf.len()).into_bytes();
        frame.extend_from_slice(buf);
        frame.extend_from_slice(b"\r\n");
        let mut s = self.stream;
        s.write_all(&frame)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let mut s = self.stream;
        s.flush()
    }
}

/// Why a request could not be read; answered by the handler's error shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The head is malformed.
    Malformed,
    /// The head is larger than allowed.
    HeadTooLarge,
    /// The declared body is larger than allowed.
    BodyTooLarge,
    /// A body without Content-Length (chunked uploads are not accepted).
    LengthRequired,
    /// The head or body did not arrive in time.
    Timeout,
    /// Too many open connections.
    Busy,
}

/// What the server calls.
pub trait Handler: Send + Sync + 'static {
    /// Answer a request.
    fn handle(&self, req: HttpRequest) -> HttpResponse;
    /// Answer a request that could not be read.
    fn refuse(&self, why: Refusal, peer: SocketAddr) -> HttpResponse;
}

/// A counting semaphore.
struct Permits {
    free: Mutex<usize>,
    cv: Condvar,
}

impl Permits {
    fn acquire(&self) {
        let mut g = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *g == 0 {
            g = self
                .cv
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *g -= 1;
    }

    fn release(&self) {
        let mut g = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g += 1;
        self.cv.notify_one();
    }
}

/// A running server.
pub struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    busy: Arc<AtomicUsize>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Serve `listener` with `handler`.
    pub fn start(
        listener: TcpListener,
        limits: HttpLimits,
        handler: Arc<dyn Handler>,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(AtomicUsize::new(0));
        let busy = Arc::new(AtomicUsize::new(0));
        let permits = Arc::new(Permits {
            free: Mutex::new(limits.workers.max(1)),
            cv: Condvar::new(),
        });
        let (s, o, b) = (Arc::clone(&stop), Arc::clone(&open), Arc::clone(&busy));
        let acceptor = std::thread::Builder::new()
            .name("pchronicle-accept".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if s.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = conn else {
                        // Out of descriptors or a reset before accept: wait a little.
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    let Ok(peer) = stream.peer_addr() else {
                        continue;
                    };
                    if o.load(Ordering::SeqCst) >= limits.max_connections {
                        let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                        let mut r = handler.refuse(Refusal::Busy, peer);
                        let _ = write_response(&stream, &mut r, false, false, true);
                        continue;
                    }
                    o.fetch_add(1, Ordering::SeqCst);
                    let (h, p, o2, b2, s2) = (
                        Arc::clone(&handler),
                        Arc::clone(&permits),
                        Arc::clone(&o),
                        Arc::clone(&b),
                        Arc::clone(&s),
                    );
                    let spawned = std::thread::Builder::new()
                        .name("pchronicle-conn".into())
                        .spawn(move || {
                            connection(stream, peer, limits, &*h, &p, &b2, &s2);
                            o2.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        o.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })?;
        Ok(HttpServer {
            addr,
            stop,
            busy,
            acceptor: Some(acceptor),
        })
    }

    /// Stop accepting, then wait up to `grace` for requests in progress.
    pub fn shutdown(mut self, grace: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        let t = Instant::now();
        while self.busy.load(Ordering::SeqCst) > 0 && t.elapsed() < grace {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Serve one connection until it closes, errs, idles out or the server stops.
fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    limits: HttpLimits,
    handler: &dyn Handler,
    permits: &Permits,
    busy: &AtomicUsize,
    stop: &AtomicBool,
) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_write_timeout(Some(limits.write_timeout));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(16 << 10, read_half);
    let mut first = true;
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        // Idle: wait for the first byte of the next request.
        let idle = if first {
            limits.head_timeout
        } else {
            limits.idle_timeout
        };
        first = false;
        if stream.set_read_timeout(Some(idle)).is_err() {
            return;
        }
        match reader.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(_) => {}
        }
        let head = match read_head(&mut reader, &stream, &limits) {
            Ok(h) => h,
            Err(why) => {
                let mut r = handler.refuse(why, peer);
                let _ = write_response(&stream, &mut r, false, false, true);
                drain(&mut reader, &stream);
                return;
            }
        };
        let (method, target, keep_alive, headers, v11) = head;
        let te = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"));
        // One Content-Length, digits only (no sign, no list): anything else
        // could frame the body differently from a proxy in front.
        let lens: Vec<&str> = headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.trim())
            .collect();
        let len_text = match lens.as_slice() {
            [] => None,
            [one] if !one.is_empty() && one.bytes().all(|c| c.is_ascii_digit()) => {
                Some((*one).to_string())
            }
            _ => Some(String::from("invalid")),
        };
        let head_only = method == "HEAD";
        let refuse = |why: Refusal, reader: &mut BufReader<TcpStream>| {
            let mut r = handler.refuse(why, peer);
            let _ = write_response(&stream, &mut r, head_only, false, true);
            drain(reader, &stream);
        };
        if te {
            refuse(Refusal::LengthRequired, &mut reader);
            return;
        }
        let len: u64 = match len_text.as_deref().map(str::parse::<u64>) {
            None => 0,
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                refuse(Refusal::Malformed, &mut reader);
                return;
            }
        };
        if len > limits.max_body_bytes {
            refuse(Refusal::BodyTooLarge, &mut reader);
            return;
        }
        let mut body = Vec::new();
        if len > 0 {
            let expects = headers.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("expect") && v.trim().eq_ignore_ascii_case("100-continue")
            });
            if expects
                && (&stream)
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .is_err()
            {
                return;
            }
            if read_exact_by(
                &mut reader,
                &stream,
                len as usize,
                limits.body_timeout,
                &mut body,
            )
            .is_err()
            {
                refuse(Refusal::Timeout, &mut reader);
                return;
            }
        }
        let req = HttpRequest {
            method,
            target,
            headers,
            body,
            peer,
            version: if v11 { "HTTP/1.1" } else { "HTTP/1.0" },
            keep_alive,
            gone: Arc::new(AtomicBool::new(false)),
        };
        permits.acquire();
        busy.fetch_add(1, Ordering::SeqCst);
        let watch = ClientWatch::start(&stream, Arc::clone(&req.gone));
        let mut resp = handler.handle(req);
        drop(watch);
        busy.fetch_sub(1, Ordering::SeqCst);
        permits.release();
        let keep = keep_alive && !stop.load(Ordering::SeqCst);
        // HTTP/1.0 has no chunked coding: a streamed body is sent as is and
        // the connection closed after it.
        let keep = keep && (v11 || resp.stream.is_none());
        if write_response(&stream, &mut resp, head_only, keep, v11).is_err() || !keep {
            return;
        }
    }
}

/// Watches a connection while its request is handled: every 100 ms it
/// peeks at the socket without blocking, and sets `gone` once the client
/// has closed it (end of stream or a reset). Bytes of a next request do not
/// count as gone. Dropping it stops the thread and waits for it, so the
/// socket is blocking again before the answer is written.
struct ClientWatch {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ClientWatch {
    fn start(stream: &TcpStream, gone: Arc<AtomicBool>) -> ClientWatch {
        let done = Arc::new(AtomicBool::new(false));
        let thread = stream.try_clone().ok().and_then(|s| {
            let done = Arc::clone(&done);
            std::thread::Builder::new()
                .name("pchronicle-client-watch".into())
                .spawn(move || {
                    // A request answered at once needs no look at all.
                    std::thread::park_timeout(Duration::from_millis(100));
                    while !done.load(Ordering::SeqCst) {
                        if s.set_nonblocking(true).is_err() {
                            return;
                        }
                        let mut b = [0u8; 1];
                        let closed = match s.peek(&mut b) {
                            Ok(0) => true,
                            Ok(_) => false,
                            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                        };
                        let _ = s.set_nonblocking(false);
                        if closed {
                            gone.store(true, Ordering::SeqCst);
                            return;
                        }
                        std::thread::park_timeout(Duration::from_millis(100));
                    }
                })
                .ok()
        });
        ClientWatch { done, thread }
    }
}

impl Drop for ClientWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

type Head = (String, String, bool, Vec<(String, String)>, bool);

/// Read a request head within the head timeout and size bounds.
fn read_head(
    reader: &mut BufReader<TcpStream>,
    stream: &TcpStream,
    limits: &HttpLimits,
) -> Result<Head, Refusal> {
    let deadline = Instant::now() + limits.head_timeout;
    let mut total = 0usize;
    let mut lines: Vec<String> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refusal::Timeout);
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| Refusal::Timeout)?;
        let mut line = Vec::new();
        let limit = (limits.max_head_bytes - total.min(limits.max_head_bytes)) as u64 + 1;
        match reader.by_ref().take(limit).read_until(b'\n', &mut line) {
            Ok(0) => return Err(Refusal::Malformed),
            Ok(n) => total += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Refusal::Timeout)
            }
            Err(_) => return Err(Refusal::Malformed),
        }
        if total > limits.max_head_bytes {
            return Err(Refusal::HeadTooLarge);
        }
        if !line.ends_with(b"\n") {
            // EOF or the size bound inside a line.
            return Err(if total >= limits.max_head_bytes {
                Refusal::HeadTooLarge
            } else {
                Refusal::Malformed
            });
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        if line.is_empty() {
            if lines.is_empty() {
                continue; // tolerate a blank line before the request line
            }
            break;
        }
        let text = String::from_utf8(line).map_err(|_| Refusal::Malformed)?;
        lines.push(text);
        if lines.len() > limits.max_headers + 1 {
            return Err(Refusal::HeadTooLarge);
        }
    }
    parse_head_lines(&lines)
}

/// Parse the lines of a request head (request line first, line ends
/// removed, at least one line) into method, target, keep-alive, headers and
/// whether the version is HTTP/1.1.
pub(crate) fn parse_head_lines(lines: &[String]) -> Result<Head, Refusal> {
    let Some(first) = lines.first() else {
        return Err(Refusal::Malformed);
    };
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed);
    };
    if method.is_empty()
        || !method.bytes().all(|c| c.is_ascii_uppercase())
        || !target.starts_with('/')
        || target.bytes().any(|c| c.is_ascii_control() || c == b' ')
    {
        return Err(Refusal::Malformed);
    }
    let v11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(Refusal::Malformed),
    };
    let mut headers = Vec::with_capacity(lines.len() - 1);
    for l in &lines[1..] {
        let (k, v) = l.split_once(':').ok_or(Refusal::Malformed)?;
        if k.is_empty()
            || k.bytes()
                .any(|c| !(c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)))
        {
            return Err(Refusal::Malformed);
        }
        // Field values hold no controls but horizontal tab (no bare CR, NUL
        // or DEL that could split or smuggle a header downstream).
        if v.bytes().any(|c| (c < 0x20 && c != b'\t') || c == 0x7f) {
            return Err(Refusal::Malformed);
        }
        headers.push((k.to_string(), v.trim().to_string()));
    }
    let conn = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("connection"))
        .map(|(_, v)| v.to_ascii_lowercase());
    let keep_alive = match conn.as_deref() {
        Some(c) if c.contains("close") => false,
        Some(c) if c.contains("keep-alive") => true,
        _ => v11,
    };
    Ok((
        method.to_string(),
        target.to_string(),
        keep_alive,
        headers,
        v11,
    ))
}

fn read_exact_by(
    reader: &mut BufReader<TcpStream>,
    stream: &TcpStream,
    len: usize,
    timeout: Duration,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let deadline = Instant::now() + timeout;
    out.reserve(len.min(1 << 20));
    let mut buf = [0u8; 16 << 10];
    while out.len() < len {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let want = (len - out.len()).min(buf.len());
        let n = reader.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        out.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

/// Read and drop what the client still sends (briefly, boundedly) so that
/// closing the socket does not reset it before the answer is read.
fn drain(reader: &mut BufReader<TcpStream>, stream: &TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut left: usize = 8 << 20;
    let mut buf = [0u8; 16 << 10];
    while left > 0 {
        let t = deadline.saturating_duration_since(Instant::now());
        if t.is_zero() || stream.set_read_timeout(Some(t)).is_err() {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        502 => "Bad Gateway",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        other => http::StatusCode::from_u16(other)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Status"),
    }
}

/// Status line, the response's headers (any with a line break dropped),
/// `framing` (the body's length or coding header line) and Date/Connection.
fn response_head(version: &str, r: &HttpResponse, framing: &str, keep: bool) -> String {
    let mut head = format!("{version} {} {}\r\n", r.status, reason(r.status));
    for (k, v) in &r.headers {
        if v.bytes().any(|c| c == b'\r' || c == b'\n') {
            continue;
        }
        head.push_str(k);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str(&format!(
        "{framing}Date: {}\r\nConnection: {}\r\n\r\n",
        chrono::Utc::now().format("%a, %d %b %Y %H:%M:%S GMT"),
        if keep { "keep-alive" } else { "close" }
    ));
    head
}

fn write_response(
    mut stream: &TcpStream,
    r: &mut HttpResponse,
    head_only: bool,
    keep: bool,
    chunked: bool,
) -> std::io::Result<()> {
    if let Some(body) = r.stream.take() {
        return write_streamed(stream, r, body, keep, chunked);
    }
    let head = response_head(
        "HTTP/1.1",
        r,
        &format!("Content-Length: {}\r\n", r.body.len()),
        keep,
    );
    if head_only || r.body.len() < 64 << 10 {
        let mut all = head.into_bytes();
        if !head_only {
            all.extend_from_slice(&r.body);
        }
        stream.write_all(&all)?;
    } else {
        stream.write_all(head.as_bytes())?;
        stream.write_all(&r.body)?;
    }
    stream.flush()?;
    if !keep {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    Ok(())
}

fn write_streamed(
    mut stream: &TcpStream,
    r: &HttpResponse,
    body: BodyStream,
    keep: bool,
    chunked: bool,
) -> std::io::Result<()> {
    let head = response_head(
        if chunked { "HTTP/1.1" } else { "HTTP/1.0" },
        r,
        if chunked {
            "Transfer-Encoding: chunked\r\n"
        } else {
            ""
        },
        keep,
    );
    let sent = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.flush());
    // The body writer runs even when the head failed, so that it can
    // finish its own work (it sees the failure on its first write).
    let mut w = Chunked {
        stream,
        chunked,
        failed: sent.as_ref().err().map(std::io::Error::kind),
    };
    let done = (body.0)(&mut w);
    sent?;
    if let Err(e) = done {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        return Err(e);
    }
    if chunked {
        stream.write_all(b"0\r\n\r\n")?;
        stream.flush()?;
    }
    if !keep {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(lines: &[&str]) -> Result<Head, Refusal> {
        parse_head_lines(&lines.iter().map(ToString::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn request_heads_are_checked() {
        let (m, t, keep, h, v11) = head(&["GET /a?b=1 HTTP/1.1", "Host: x", "X-A:  v "]).unwrap();
        assert_eq!(
            (m.as_str(), t.as_str(), keep, v11),
            ("GET", "/a?b=1", true, true)
        );
        assert_eq!(h[1], ("X-A".to_string(), "v".to_string()));
        // HTTP/1.0 closes unless asked; `close` wins on 1.1.
        assert!(!head(&["GET / HTTP/1.0"]).unwrap().2);
        assert!(
            head(&["GET / HTTP/1.0", "Connection: keep-alive"])
                .unwrap()
                .2
        );
        assert!(!head(&["GET / HTTP/1.1", "Connection: close"]).unwrap().2);
        for bad in [
            &["get / HTTP/1.1"][..],
            &["GET http://x/ HTTP/1.1"],
            &["GET / HTTP/2"],
            &["GET /a b HTTP/1.1"],
            &["GET / HTTP/1.1", "Bad Name: x"],
            &["GET / HTTP/1.1", "no colon"],
            // A bare CR, NUL or DEL in a value could split a header downstream.
            &["GET / HTTP/1.1", "X-A: a\rInjected: b"],
            &["GET / HTTP/1.1", "X-A: a\0b"],
            &["GET / HTTP/1.1", "X-A: a\u{7f}"],
            &[],
        ] {
            assert!(matches!(head(bad), Err(Refusal::Malformed)), "{bad:?}");
        }
        assert!(head(&["GET / HTTP/1.1", "X-A: tab\tinside"]).is_ok());
    }
}
