//! Stamps the binary with the git commit and the build date for `muster --version`:
//! `MUSTER_GIT_COMMIT` (`git rev-parse --short=12 HEAD`, or `unknown` without git or a
//! repository) and `MUSTER_BUILD_DATE` (YYYY-MM-DD, UTC, from `SOURCE_DATE_EPOCH` if set, else
//! today).
//!
//! The script reruns only when HEAD moves (the HEAD file, the ref it names, packed-refs) or
//! `SOURCE_DATE_EPOCH` changes, so an edit elsewhere does not rebuild the crate; the date is the
//! day the script last ran. Set `SOURCE_DATE_EPOCH` for a reproducible date.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let repo = manifest_dir.join("../..");

    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    for path in head_files(&repo) {
        println!("cargo:rerun-if-changed={}", path.display());
    }

    println!("cargo:rustc-env=MUSTER_GIT_COMMIT={}", commit(&repo));
    println!("cargo:rustc-env=MUSTER_BUILD_DATE={}", build_date());
}

/// The short commit of HEAD, or `unknown`.
fn commit(repo: &Path) -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The files whose change moves HEAD: `HEAD` itself, the ref it names (loose, else
/// `packed-refs`). `.git` is a directory, or in a worktree a file `gitdir: <path>`, whose refs
/// live in the directory named by its `commondir`. Only existing files are returned: cargo
/// reruns the script on every build for a path that does not exist.
fn head_files(repo: &Path) -> Vec<PathBuf> {
    let dot_git = repo.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else if let Ok(text) = std::fs::read_to_string(&dot_git) {
        // Watch the pointer itself too: re-pointing the worktree changes HEAD.
        println!("cargo:rerun-if-changed={}", dot_git.display());
        match text.trim().strip_prefix("gitdir:") {
            Some(dir) => repo.join(dir.trim()),
            None => return Vec::new(),
        }
    } else {
        // No repository (a source tarball): nothing to watch; the commit is `unknown`.
        return Vec::new();
    };
    let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(dir) => git_dir.join(dir.trim()),
        Err(_) => git_dir.clone(),
    };

    let head = git_dir.join("HEAD");
    let mut files = vec![head.clone()];
    if let Some(name) =
        std::fs::read_to_string(&head).ok().and_then(|h| h.trim().strip_prefix("ref:").map(|r| r.trim().to_owned()))
    {
        // Per-worktree refs (HEAD-like) sit in the git dir, branches in the common dir.
        match [git_dir.join(&name), common_dir.join(&name)].into_iter().find(|p| p.is_file()) {
            Some(loose) => files.push(loose),
            // Packed (by `git gc`): the next commit writes the loose file anew, in the nearest
            // directory that exists (cargo watches a directory's whole tree).
            None => {
                files.extend(common_dir.join(&name).ancestors().skip(1).find(|d| d.is_dir()).map(Path::to_path_buf))
            }
        }
        // Where a packed branch is read from.
        files.push(common_dir.join("packed-refs"));
    }
    files.retain(|p| p.exists());
    files
}

/// YYYY-MM-DD (UTC) of `SOURCE_DATE_EPOCH` when set, else of now.
fn build_date() -> String {
    let secs = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => {
            v.trim().parse::<i64>().unwrap_or_else(|_| panic!("SOURCE_DATE_EPOCH is not a number of seconds: {v:?}"))
        }
        Err(_) => SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
    };
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
