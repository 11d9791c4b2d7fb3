//! What the served ledgers must show once a history ends: a tenure live at a fenced push's
//! instant, and every ledger verified.

use super::*;

/// One line per record of a ledger, for messages.
pub(super) fn summary(chain: &[Value]) -> String {
    chain
        .iter()
        .map(|l| {
            format!(
                "  {} {} token {} at {} expires {}\n",
                l["event"], l["holder"], l["token"], l["at"], l["expires_at"]
            )
        })
        .collect()
}

/// Whether the tenure `token` of `holder` was live at server clock `at` by the server's ledger:
/// it began by then and had neither expired nor been freed (released, or taken over) before
/// it. A record is dated by its client's clock, which may be a second off the server's.
pub(super) fn tenure_live_at(chain: &[Value], token: u64, holder: &str, at: DateTime<Utc>) -> bool {
    let time = |v: &Value| v.as_str().and_then(|s| s.parse::<DateTime<Utc>>().ok());
    let slack = Duration::seconds(1);
    let Some(first) = chain
        .iter()
        .position(|l| l["token"].as_u64() == Some(token) && l["event"] == "acquire")
    else {
        return false;
    };
    if chain[first]["holder"].as_str() != Some(holder)
        || time(&chain[first]["at"]).is_none_or(|start| start - slack > at)
    {
        return false;
    }
    // Live strictly before its expiry; up to its freeing, dated by a clock that may have been
    // a second behind the server's (a push the server judged at that second came first).
    let mut expiry: Option<DateTime<Utc>> = None;
    let mut freed: Option<DateTime<Utc>> = None;
    for lease in &chain[first..] {
        let same =
            lease["token"].as_u64() == Some(token) && lease["holder"].as_str() == Some(holder);
        if !same {
            freed = time(&lease["at"]).map(|t| t + slack);
            break;
        }
        expiry = time(&lease["expires_at"]);
    }
    expiry.is_none_or(|e| at < e) && freed.is_none_or(|f| at <= f)
}

/// Along the server's ledger of `issue`: tokens grow by one per new tenure and never
/// otherwise, and each new tenure begins over a record that was free or expired.
pub(super) fn check_ledger(server: &Server, issue: &str) -> Result<(), String> {
    let chain = server.leases(issue);
    let time = |v: &Value| v.as_str().and_then(|s| s.parse::<DateTime<Utc>>().ok());
    let mut previous: Option<&Value> = None;
    for lease in &chain {
        let token = lease["token"].as_u64().unwrap_or(0);
        let before = previous.map_or(0, |p| p["token"].as_u64().unwrap_or(0));
        let new_tenure = lease["event"] == "acquire";
        if new_tenure && token != before + 1 {
            return Err(format!(
                "issue {issue}: a new tenure took token {token} after {before}"
            ));
        }
        if !new_tenure && token != before {
            return Err(format!(
                "issue {issue}: a {} changed the token from {before} to {token}",
                lease["event"]
            ));
        }
        if let (true, Some(p)) = (new_tenure, previous) {
            let at = time(&lease["at"]);
            let still_live = p["holder"].is_string()
                && time(&p["expires_at"]).is_none_or(|e| at.is_some_and(|a| a < e));
            if still_live {
                return Err(format!(
                    "issue {issue}: tenure {token} began at {} while tenure {before} was live: {p}",
                    lease["at"]
                ));
            }
        }
        previous = Some(lease);
    }
    Ok(())
}
