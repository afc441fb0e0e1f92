//! Files muster writes that others must not redirect or read half-written: keys, certificates,
//! kubeconfigs. Each is written to a new file beside it and renamed over it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Replaces the file at `path` with `contents`, with permissions `mode`. The new file is created
/// beside it under a fresh name with `O_CREAT|O_EXCL`, which never follows a symbolic link (a link
/// planted at that name fails the call, and a fresh name is taken), and renamed over `path`,
/// which replaces a link there rather than writing where it points. Readers see the old file or
/// the whole new one, never part, and a key is never readable by others, not even briefly.
pub fn replace_file(path: &Path, contents: &[u8], mode: u32) -> std::io::Result<()> {
    let (tmp, mut file) = create_beside(path, mode)?;
    let written = file.write_all(contents).and_then(|()| file.sync_all()).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A new file in `path`'s directory, named after it and unused until now.
fn create_beside(path: &Path, mode: u32) -> std::io::Result<(PathBuf, std::fs::File)> {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let mut last = None;
    for _ in 0..16 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{name}.{}.{n}.{nanos}.tmp", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("muster-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_symlink_at_the_target_is_replaced_not_followed() {
        let dir = temp_dir("symlink");
        let victim = dir.join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        let target = dir.join("tls.key");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        replace_file(&target, b"secret", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.file_type().is_file(), "the link was replaced by a file");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2, "no temporary file is left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_existing_file_is_replaced_with_the_mode_asked() {
        let dir = temp_dir("replace");
        let target = dir.join("ca.crt");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o666)).unwrap();
        replace_file(&target, b"new", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o644);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_and_leaves_nothing() {
        let dir = temp_dir("missing");
        let err = replace_file(&dir.join("absent/tls.key"), b"x", 0o600).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
