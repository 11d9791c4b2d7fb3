//! A small web front for the real `git http-backend`, in the test harness itself: HTTP/1.1 on
//! 127.0.0.1 with basic authentication, so the http tests run on a machine that has only git
//! and Rust. It keeps what the hook depends on: the backend runs as CGI with `REMOTE_USER` set
//! to the authenticated user (and `REMOTE_PORT` to the client's port, as web servers set it),
//! and a request without valid credentials gets `401` with a
//! `WWW-Authenticate` challenge, as a web server's basic auth does. A body of known length
//! streams to the backend as it arrives, as lighttpd passes it, so a receive-pack killed while
//! it reads a push ([`crate::proxy`]) is one here too. One connection is one request
//! (`Connection: close`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::env;

/// A running front; stopped when dropped.
pub struct Front {
    port: u16,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

/// What every request needs: where the repositories are, who may log in, how to run git.
struct Site {
    projects: PathBuf,
    home: PathBuf,
    exec_path: PathBuf,
    /// user -> password.
    users: HashMap<String, String>,
    log: PathBuf,
}

impl Front {
    /// Serves the repositories under `projects` on `port` for `users` (password `<user>pw`),
    /// with `HOME` = `home`; logs one line per request to `log`.
    pub fn start(
        projects: &Path,
        home: &Path,
        users: &[String],
        port: u16,
        log: &Path,
    ) -> std::io::Result<Front> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
        let exec_path = Command::new("git").arg("--exec-path").output()?;
        let site = Arc::new(Site {
            projects: projects.to_owned(),
            home: home.to_owned(),
            exec_path: PathBuf::from(String::from_utf8_lossy(&exec_path.stdout).trim()),
            users: users
                .iter()
                .map(|u| (u.clone(), format!("{u}pw")))
                .collect(),
            log: log.to_owned(),
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        let acceptor = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let site = Arc::clone(&site);
                std::thread::spawn(move || {
                    let _ = serve(&site, stream);
                });
            }
        });
        Ok(Front {
            port,
            stopping,
            acceptor: Some(acceptor),
        })
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the acceptor so that it sees the flag.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Answers one request on `stream`.
fn serve(site: &Site, stream: TcpStream) -> std::io::Result<()> {
    let port = stream.peer_addr().map(|a| a.port()).unwrap_or(0);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(());
    };
    let mut headers: HashMap<String, String> = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let user = headers
        .get("authorization")
        .and_then(|a| a.strip_prefix("Basic "))
        .and_then(|b| base64_decode(b.trim()))
        .and_then(|pair| {
            let (user, password) = pair.split_once(':')?;
            (site.users.get(user).map(String::as_str) == Some(password)).then(|| user.to_owned())
        });
    log(site, &format!("{method} {target} user={user:?}"));
    let Some(user) = user else {
        read_body(&mut reader, &headers)?;
        out.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return out.shutdown(Shutdown::Both);
    };
    // A body of a known length streams to the backend as it comes, as web servers pass it
    // (the backend, and its receive-pack, run while the push is still arriving); a chunked one
    // is read whole first, to learn its length.
    let chunked = headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let whole = if chunked {
        Some(read_body(&mut reader, &headers)?)
    } else {
        None
    };
    let length = whole
        .as_ref()
        .map_or_else(|| content_length(&headers), Vec::len);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut cmd = Command::new(site.exec_path.join("git-http-backend"));
    env::hermetic(&mut cmd, &site.home, &site.home);
    cmd.env("GIT_PROJECT_ROOT", &site.projects)
        .env("GIT_HTTP_EXPORT_ALL", "")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REMOTE_PORT", port.to_string())
        .env("REMOTE_USER", &user)
        .env("AUTH_TYPE", "Basic")
        .env("CONTENT_LENGTH", length.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (header, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
    ] {
        if let Some(value) = headers.get(header) {
            cmd.env(var, value);
        }
    }
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let writer = std::thread::spawn(move || {
        let _ = match whole {
            Some(body) => stdin.write_all(&body),
            None => std::io::copy(&mut reader.take(length as u64), &mut stdin).map(drop),
        };
    });
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_end(&mut output)?;
    child.wait()?;
    // A CGI response: headers (one may be `Status:`), a blank line, the body.
    let split = find(&output, b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| find(&output, b"\n\n").map(|i| (i, 2)));
    let (head, body) = match split {
        Some((i, n)) => (&output[..i], &output[i + n..]),
        None => (&output[..0], &output[..]),
    };
    let head = String::from_utf8_lossy(head);
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => {
                status = value.trim().to_owned();
            }
            Some(_) => response += &format!("{line}\r\n"),
            None => {}
        }
    }
    write!(
        out,
        "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()?;
    let closed = out.shutdown(Shutdown::Both);
    // A backend that ended before it read the whole body (killed) leaves the writer reading
    // the socket: closing it ends the writer too.
    let _ = writer.join();
    closed
}

/// Reads a request body of `Content-Length` bytes, or in chunks (`Transfer-Encoding:
/// chunked`, which git uses for large pushes).
fn read_body(
    reader: &mut BufReader<TcpStream>,
    headers: &HashMap<String, String>,
) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if size == 0 {
                let mut trailer = String::new();
                reader.read_line(&mut trailer)?;
                return Ok(body);
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader.read_exact(&mut body[start..])?;
            let mut crlf = [0; 2];
            reader.read_exact(&mut crlf)?;
        }
    }
    body.resize(content_length(headers), 0);
    reader.read_exact(&mut body)?;
    Ok(body)
}

/// The request's `Content-Length` (0 when it gives none).
fn content_length(headers: &HashMap<String, String>) -> usize {
    headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn log(site: &Site, line: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&site.log)
    {
        let _ = writeln!(f, "{line}");
    }
}

/// Decodes standard base64 (with padding) into UTF-8 text.
pub fn base64_decode(text: &str) -> Option<String> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        for i in 0..n {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    String::from_utf8(out).ok()
}
