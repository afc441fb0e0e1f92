//! Where `muster controller` takes its store from: `--store`, a file (`--store-url-file`) or the
//! environment (`MUSTER_STORE_URL`). A PostgreSQL URL carries a password; on the command line
//! every local user reads it in /proc/PID/cmdline, in a file or the environment only muster's
//! own user does.

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The environment variable read when neither `--store` nor `--store-url-file` is given.
pub const ENV: &str = "MUSTER_STORE_URL";
/// The store when nothing names one.
pub const DEFAULT: &str = "sqlite:muster.db";

/// The store URL from the flag, else the file, else `env` (the value of [`ENV`]), else
/// [`DEFAULT`]. The flag and the file together are refused; a file's trailing newline is not
/// part of the URL.
pub fn resolve(flag: Option<&str>, file: Option<&Path>, env: Option<String>) -> Result<String> {
    match (flag, file) {
        (Some(_), Some(_)) => bail!("--store and --store-url-file both name the store; give one"),
        (Some(url), None) => {
            if has_password(url) {
                tracing::warn!(
                    "the store URL on the command line has a password, which every local user can read in \
                     /proc; pass it with --store-url-file or ${ENV} instead"
                );
            }
            Ok(url.to_string())
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--store-url-file {}: cannot read it", path.display()))?;
            let url = text.trim_end_matches(['\n', '\r']);
            if url.trim().is_empty() {
                bail!("--store-url-file {}: the file is empty; write the store URL in it", path.display());
            }
            Ok(url.to_string())
        }
        (None, None) => Ok(env.filter(|v| !v.trim().is_empty()).unwrap_or_else(|| DEFAULT.to_string())),
    }
}

/// Whether a PostgreSQL URL or key=value string carries a password.
fn has_password(url: &str) -> bool {
    let authority = url.split_once("://").map(|(_, rest)| rest.split(['/', '?']).next().unwrap_or(""));
    let in_url = authority.and_then(|a| a.rsplit_once('@')).is_some_and(|(user, _)| user.contains(':'));
    in_url || url.split_whitespace().any(|kv| kv.starts_with("password="))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file in the temporary directory, removed on drop.
    struct TempFile(std::path::PathBuf);

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn file(text: &str) -> TempFile {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("muster-store-url-{}-{n}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }

    const URL: &str = "postgres://muster:s3cret@db/muster?sslmode=verify-full&sslrootcert=/etc/ca.crt";

    #[test]
    fn the_store_url_comes_from_the_flag_the_file_or_the_environment_in_that_order() {
        let f = file(&format!("{URL}\n"));
        assert_eq!(resolve(Some("sqlite:a.db"), None, Some(URL.into())).unwrap(), "sqlite:a.db");
        assert_eq!(resolve(None, Some(&f.0), Some("sqlite:env.db".into())).unwrap(), URL, "the newline is not kept");
        assert_eq!(resolve(None, None, Some(URL.into())).unwrap(), URL);
        assert_eq!(resolve(None, None, Some(String::new())).unwrap(), DEFAULT);
        assert_eq!(resolve(None, None, None).unwrap(), DEFAULT);
    }

    #[test]
    fn a_bad_store_url_source_is_refused_naming_it() {
        let f = file(URL);
        let both = resolve(Some(URL), Some(&f.0), None).unwrap_err().to_string();
        assert!(both.contains("--store and --store-url-file both name the store"), "{both}");
        let empty = file("\n");
        let err = format!("{:#}", resolve(None, Some(&empty.0), None).unwrap_err());
        assert!(err.contains("the file is empty"), "{err}");
        let missing = format!("{:#}", resolve(None, Some(Path::new("/nonexistent/url")), None).unwrap_err());
        assert!(missing.contains("--store-url-file /nonexistent/url: cannot read it"), "{missing}");
    }

    #[test]
    fn passwords_are_seen_in_both_forms() {
        assert!(has_password(URL));
        assert!(has_password("host=db user=muster password=x"));
        assert!(!has_password("postgres://muster@db/muster"));
        assert!(!has_password("host=db user=muster"));
        assert!(!has_password("sqlite:/var/lib/muster/muster.db"));
    }
}
