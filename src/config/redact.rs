//! Passwords out of URLs, for messages and `Debug`: parsed with the `url` crate, so an odd URL
//! (an `@` inside the password, a query, IPv6 brackets, no scheme) is read as redis-rs reads it.

/// `url` with its user and password replaced by `***` (`redis://***@host:port/db`). A URL
/// whose credentials the parse did not find where an `@` says they are (it does not parse: a
/// bad port, a stray character; or it parses as something else: `redis:/u:pw@h` as a path,
/// `redis://u:12/pw@h` as host `u`, port 12 and a path) has everything between its scheme and
/// its last `@` hidden instead: input read another way is never shown with its secret.
#[doc(hidden)]
pub fn redact(url: &str) -> String {
    if let Ok(mut parsed) = url::Url::parse(url) {
        let credentials = !parsed.username().is_empty() || parsed.password().is_some();
        if credentials && !parsed.path().contains('@') {
            // Both setters only fail on URLs that cannot carry credentials (`mailto:`), which
            // have none to hide.
            let _ = parsed.set_password(None);
            let _ = parsed.set_username("");
            let text = parsed.to_string();
            return match text.find("://") {
                Some(s) => format!("{}***@{}", &text[..s + 3], &text[s + 3..]),
                None => text,
            };
        }
    }
    // Not parsed, parsed without credentials, or with an `@` left in the path (a password
    // holding `@` and `/`): hide up to the last `@`, which ends any userinfo however read.
    match url.rfind('@') {
        None => url.to_owned(),
        Some(at) => {
            let start = url.find("://").map_or(0, |s| s + 3);
            match at >= start {
                true => format!("{}***{}", &url[..start], &url[at..]),
                false => format!("***{}", &url[at..]),
            }
        }
    }
}

/// `url` with `password` set beside the user it names (`redis://ops@h` and `pw` give
/// `redis://ops:pw@h`; `redis://h` gives `redis://:pw@h`, the default user), the password
/// percent-encoded as the `url` crate does. The operator CLI's one way of joining a password
/// from a file or the environment to a URL.
///
/// # Errors
///
/// A message (never containing the password) when `url` does not parse, cannot carry
/// credentials, or already carries a password: two passwords for one connection is a mistake to
/// report, not a choice to make silently.
#[doc(hidden)]
pub fn url_with_password(url: &str, password: &str) -> Result<String, String> {
    let mut parsed =
        url::Url::parse(url).map_err(|e| format!("cannot read the URL {}: {e}", redact(url)))?;
    if parsed.password().is_some() {
        return Err(format!(
            "the URL {} carries a password and a second one was given (a password file or \
             REDIS_PASSWORD): keep one",
            redact(url)
        ));
    }
    parsed
        .set_password(Some(password))
        .map_err(|()| format!("the URL {} cannot carry a password", redact(url)))?;
    Ok(parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::{redact, url_with_password};

    #[test]
    fn a_password_joins_the_urls_user() {
        let joined = |u: &str| url_with_password(u, "p@ss w").unwrap();
        assert_eq!(joined("redis://h:1/0"), "redis://:p%40ss%20w@h:1/0");
        assert_eq!(joined("redis://ops@h:1"), "redis://ops:p%40ss%20w@h:1");
        assert_eq!(
            joined("rediss://ops@[::1]:1/"),
            "rediss://ops:p%40ss%20w@[::1]:1/"
        );
        // What redis-rs reads back is the password as given.
        let info: redis::ConnectionInfo = joined("redis://ops@h:1").as_str().parse().unwrap();
        assert_eq!(info.redis_settings().password(), Some("p@ss w"));
        assert_eq!(info.redis_settings().username(), Some("ops"));
        let e = url_with_password("redis://ops:other@h:1", "p@ss w").unwrap_err();
        assert!(
            e.contains("keep one") && !e.contains("other") && !e.contains("p@ss"),
            "{e}"
        );
        let e = url_with_password("not a url", "p@ss w").unwrap_err();
        assert!(!e.contains("p@ss"), "{e}");
    }

    #[test]
    fn passwords_and_users_are_hidden() {
        assert_eq!(redact("redis://:pw@h:1/"), "redis://***@h:1/");
        assert_eq!(redact("redis://u:pw@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact("rediss://u@h:1/"), "rediss://***@h:1/");
        assert_eq!(redact("redis://h:1/"), "redis://h:1/");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn odd_urls_keep_their_secret() {
        // An `@` inside the password (percent-encoded or not) and in the query.
        let shown = redact("redis://user:p%40ss@h:6379/0?protocol=resp3&x=a@b");
        assert!(
            !shown.contains("p%40ss") && !shown.contains("user"),
            "{shown}"
        );
        assert!(shown.starts_with("redis://***@h:6379/0?"), "{shown}");
        let shown = redact("redis://user:p@ss@h:6379/");
        assert!(!shown.contains("p@ss") && !shown.contains("ss@"), "{shown}");
        // IPv6.
        assert_eq!(
            redact("redis://u:pw@[::1]:6379/"),
            "redis://***@[::1]:6379/"
        );
        // Not a URL at all, but with a secret-looking part: hidden anyway.
        let shown = redact("redis://u:pw@");
        assert!(!shown.contains("pw"), "{shown}");
    }
}
