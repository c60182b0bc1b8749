//! Passwords out of URLs, for messages and `Debug`: parsed with the `url` crate, so an odd URL
//! (an `@` inside the password, a query, IPv6 brackets, no scheme) is read as redis-rs reads it.

/// `url` with its user and password replaced by `***` (`redis://***@host:port/db`). A URL that
/// does not parse, but has an `@` after its scheme, has everything between the scheme and that
/// last `@` hidden instead: unreadable input is never shown with its secret.
pub(crate) fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if !parsed.username().is_empty() || parsed.password().is_some() => {
            // Both setters only fail on URLs that cannot carry credentials (`mailto:`), which
            // have none to hide.
            let _ = parsed.set_password(None);
            let _ = parsed.set_username("");
            let text = parsed.to_string();
            match text.find("://") {
                Some(s) => format!("{}***@{}", &text[..s + 3], &text[s + 3..]),
                None => text,
            }
        }
        Ok(_) => url.to_owned(),
        Err(_) => match (url.find("://"), url.rfind('@')) {
            (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
            _ => url.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

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
