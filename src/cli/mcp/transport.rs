//! The client's messages, bounded: each line of standard input is passed on to rmcp as it
//! is, except one longer than [`MAX_REQUEST`], which rmcp would drop unanswered. Such a line
//! is read to its end without being kept and passed on as a short request of the method
//! [`OVERSIZED`], with the id the long one had, which the server answers with an error.

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest request read, in bytes: far over any call's arguments (a lease record is at
/// most 64 KiB), and under rmcp's own bound (16 MiB), past which it answers nothing.
pub(super) const MAX_REQUEST: usize = 1024 * 1024;

/// The method a request over [`MAX_REQUEST`] is replaced by.
pub(super) const OVERSIZED: &str = "git-lease/oversized";

/// How much of an oversized line's start and end is kept, to find its id.
const KEPT: usize = 4096;

/// A line as it is read: whole, or only its ends once it is over [`MAX_REQUEST`].
#[derive(Default)]
struct Line {
    bytes: Vec<u8>,
    tail: Vec<u8>,
    len: usize,
}

impl Line {
    fn push(&mut self, chunk: &[u8]) {
        self.len += chunk.len();
        if self.len <= MAX_REQUEST {
            self.bytes.extend_from_slice(chunk);
            return;
        }
        // The start is kept whole up to `KEPT`, from this chunk too if the line began in it.
        self.bytes.truncate(KEPT);
        let room = KEPT - self.bytes.len();
        self.bytes
            .extend_from_slice(&chunk[..room.min(chunk.len())]);
        self.tail.extend_from_slice(chunk);
        let extra = self.tail.len().saturating_sub(KEPT);
        self.tail.drain(..extra);
    }

    /// The line to pass on: itself, or the request that stands for it (none without an id:
    /// a notification is answered by nobody).
    fn passed_on(self) -> Option<Vec<u8>> {
        if self.len <= MAX_REQUEST {
            return Some(self.bytes);
        }
        let id = top_level_id(&self.bytes).or_else(|| last_id(&self.tail))?;
        let request = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": OVERSIZED,
            "params": { "bytes": self.len },
        });
        let mut line = request.to_string().into_bytes();
        line.push(b'\n');
        Some(line)
    }
}

/// Copies `input` to `output` a line at a time, each line bounded as the module says; ends
/// (closing `output`) when `input` ends or `output` is closed.
pub(super) async fn bound_lines(
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let mut input = BufReader::new(input);
    let mut line = Line::default();
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return output.shutdown().await;
        }
        let (chunk, ended) = match memchr(buf) {
            Some(at) => (&buf[..=at], true),
            None => (buf, false),
        };
        let used = chunk.len();
        line.push(chunk);
        input.consume(used);
        if ended {
            if let Some(bytes) = std::mem::take(&mut line).passed_on() {
                output.write_all(&bytes).await?;
                output.flush().await?;
            }
        }
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// The value of the top-level `id` of a JSON object's start, if it is there: a string or a
/// number (clients write `jsonrpc` and `id` before `params`).
fn top_level_id(start: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut at = 0;
    while at < start.len() {
        match start[at] {
            b'"' => {
                let end = string_end(start, at)?;
                let is_id_key = depth == 1 && &start[at..=end] == b"\"id\"";
                at = end + 1;
                if is_id_key {
                    if let Some(value) = value_after_colon(&start[at..]) {
                        return Some(value);
                    }
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    None
}

/// The value of the last `"id":` of a JSON object's end (a client that writes `id` last).
fn last_id(end: &[u8]) -> Option<Value> {
    let key = b"\"id\"";
    let at = end.windows(key.len()).rposition(|w| w == key)?;
    value_after_colon(&end[at + key.len()..])
}

/// The index of the quote that ends the string starting at `start[at]`.
fn string_end(start: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < start.len() {
        match start[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A string or number that follows `:` (and white space) at the start of `rest`.
fn value_after_colon(rest: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(&rest[..rest.len().min(256)]).ok()?;
    let text = text.trim_start().strip_prefix(':')?.trim_start();
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next()?.ok()? {
        id @ (Value::String(_) | Value::Number(_)) => Some(id),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_an_oversized_request_is_found_at_its_start_or_its_end() {
        let start = br#"{"jsonrpc":"2.0","params":{"id":9,"x":"\"id\":8"},"id":"a-1","method":"#;
        assert_eq!(top_level_id(start), Some(json!("a-1")));
        assert_eq!(
            top_level_id(br#"{"jsonrpc":"2.0","id": 42,"#),
            Some(json!(42))
        );
        assert_eq!(top_level_id(br#"{"params":{"id":3,"note":"xxxx"#), None);
        assert_eq!(
            last_id(br#"xxxx"},"jsonrpc":"2.0","id":7}"#),
            Some(json!(7))
        );
    }

    #[test]
    fn a_line_over_the_bound_is_passed_on_as_a_short_request_with_its_id() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"note\":\"{}\"}}}}\n",
            "x".repeat(MAX_REQUEST)
        );
        let input = format!("{{\"a\":1}}\n{long}{{\"b\":2}}\n");
        let mut out = Vec::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime
            .block_on(bound_lines(input.as_bytes(), &mut out))
            .expect("copied");
        let lines: Vec<Value> = String::from_utf8(out)
            .expect("UTF-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], json!({"a": 1}));
        assert_eq!(lines[1]["id"], json!(5));
        assert_eq!(lines[1]["method"], json!(OVERSIZED));
        assert_eq!(lines[1]["params"]["bytes"], json!(long.len()));
        assert_eq!(lines[2], json!({"b": 2}));
    }
}
