//! Errors: input errors name the file, the path to the field and what is allowed; operation errors
//! say which allocation, member or node was wrong.

/// A refused input document (cluster description, JGF, jobspec, command).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {path}: {message}")]
pub struct InputError {
    /// The file (or `<stdin>`) the input came from.
    pub file: String,
    /// Where in the document: `nodeClasses[2].capacity.cpu`, `graph.nodes[7]`, or `.` for the whole.
    pub path: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl InputError {
    pub fn new(file: &str, path: impl Into<String>, message: impl Into<String>) -> Self {
        let path = path.into();
        Self {
            file: file.to_string(),
            path: if path.is_empty() { ".".to_string() } else { path },
            message: message.into(),
        }
    }

    /// Parses `text` as YAML (a superset of JSON) into `T`, reporting the path of a bad field.
    pub fn parse_yaml<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, Self> {
        if flow_depth(text) > MAX_FLOW_DEPTH {
            // The YAML reader would refuse it too, but only after time that grows with the
            // square of the depth (minutes for a few hundred kilobytes).
            return Err(Self::new(
                file,
                "",
                format!("brackets nested more than {MAX_FLOW_DEPTH} deep; no muster input needs that many"),
            ));
        }
        let de = serde_yaml_ng::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // The YAML reader's message may start with where it was (the path, or the map that
            // holds it): the path says that once.
            let inner = match inner.split_once(": ") {
                Some((at, rest)) if at == "." || (!at.is_empty() && path.starts_with(at)) => rest.to_string(),
                _ => inner,
            };
            Self::new(file, if path == "." { String::new() } else { path }, inner)
        })
    }
}

/// The deepest nesting of `[` and `{` a YAML or JSON input may have.
const MAX_FLOW_DEPTH: usize = 128;

/// How deep `[` and `{` nest in `text`, outside quoted strings and comments.
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut quote, mut comment, mut escaped) = (0usize, 0usize, None, false, false);
    for c in text.chars() {
        match (quote, c) {
            (Some('"'), '\\') if !escaped => escaped = true,
            (Some(q), c) => {
                if c == q && !escaped {
                    quote = None;
                }
                escaped = false;
            }
            (None, '\n') => comment = false,
            (None, _) if comment => {}
            (None, '#') => comment = true,
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Why an operation on the graph was refused. The graph is unchanged after any of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("no allocation with id {0}")]
    UnknownAllocation(u64),
    #[error("allocation id {0} is already in use")]
    DuplicateAllocation(u64),
    #[error("no node named {0:?}")]
    UnknownNode(String),
    #[error("a node named {0:?} already exists")]
    DuplicateNode(String),
    #[error("allocation {alloc} has no member {member}")]
    UnknownMember { alloc: u64, member: u32 },
    #[error("allocation {0} is a reservation; only running allocations can shrink, grow or be imported")]
    NotAllocated(u64),
    #[error("allocation {0} places a fixed number of members per node; it cannot grow member by member")]
    FixedShape(u64),
    #[error("allocation {alloc} would have {wanted} members; its group allows at most {max}")]
    TooManyMembers { alloc: u64, wanted: u32, max: u32 },
    #[error("allocation {alloc} grows its optional set by {wanted} members; it takes all {whole} at once, or none")]
    PartOfOptionalSet { alloc: u64, wanted: u32, whole: u32 },
    #[error("allocation {alloc} holds {held} members; at least {min} (and at least 1) are needed")]
    TooFewMembers { alloc: u64, held: u32, min: u32 },
    #[error("node {node:?} has {free} {resource} free, {needed} is needed")]
    Insufficient { node: String, resource: String, free: String, needed: String },
    #[error("node {node:?} has no free device {device:?} of {resource}")]
    DeviceUnavailable { node: String, resource: String, device: String },
    #[error("resource {0:?} does not exist in this graph")]
    UnknownResource(String),
    #[error("no topology level {0:?} in this graph")]
    UnknownLevel(String),
    #[error(
        "a reservation on node {node:?} would overlap allocation {alloc} ending later; re-plan the reservations first"
    )]
    ReservationInTheWay { alloc: u64, node: String },
    #[error(
        "reservation {reservation:?}: its nodeSelector selects no node; label the nodes it is for, or fix the selector"
    )]
    SetAsideSelectsNothing { reservation: String },
    #[error(
        "reservation {reservation:?} overlaps reservation {other:?} on node {node:?}; give them other nodes or other times"
    )]
    SetAsideOverlap { reservation: String, other: String, node: String },
    #[error("reservation {reservation:?}: no room for what it sets aside at its start: {reason}")]
    SetAsideNoRoom { reservation: String, reason: String },
}
