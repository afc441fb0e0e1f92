//! Device selectors: CEL expressions compiled once, evaluated against published devices in
//! Kubernetes' environment for them (the `device` variable, `quantity` and `semver` values).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::ast::{ComprehensionExpr, Expr, ListExpr, LiteralValue, operators};
use cel::extractors::This;
use cel::objects::{Key, Opaque};
use cel::parser::{Expression, Macro, MacroExprHelper};
use cel::{Context, Env, ExecutionError, ParseError, Program, Value};

use super::device::{AttributeValue, PublishedDevice};
use crate::quantity::parse_scaled;

/// A selector that does not compile, with the expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("selector {expression:?} does not compile: {message}")]
pub struct SelectorError {
    pub expression: String,
    pub message: String,
}

/// One compiled CEL selector.
#[derive(Debug)]
pub struct Selector {
    pub expression: String,
    program: Program,
    /// What the expression reads of `device`, when it reads it only through fixed paths: then
    /// two devices alike on these paths match alike, and one evaluation serves both.
    reads: Option<Vec<DevicePath>>,
    /// Attribute and capacity domains the expression names: a device without one sees an empty
    /// map there, as in Kubernetes (where an unknown domain is an empty map, not an error).
    domains: Vec<(Part, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Part {
    Attributes,
    Capacity,
}

/// A fixed path into `device`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum DevicePath {
    Driver,
    /// An attribute or capacity by domain and identifier, and its qualified name
    /// (`domain/id`), as a driver may publish it.
    Entry(Part, String, String, String),
}

/// What a device has on one of a selector's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Read<'a> {
    Absent,
    Text(&'a str),
    Attribute(&'a AttributeValue),
}

/// The standard library and `cel.bind`, which Kubernetes' environment has (to name an attribute
/// domain once: `cel.bind(gpu, device.attributes["gpu.example.com"], gpu.model == "h100")`).
fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    Arc::clone(ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // A fresh Env declares no `bind`, so adding it cannot fail.
        let _ = env.add_macro(Macro::receiver("bind", 3, bind));
        Arc::new(env)
    }))
}

/// Expands `cel.bind(name, value, result)` into a comprehension over nothing whose accumulator
/// is `name`, set to `value` once: `result` then reads it as a variable.
fn bind(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<Expression>,
    args: &mut Vec<Expression>,
) -> Result<Option<Expression>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let [name, value, result] =
        std::mem::take(args).try_into().map_err(|_| helper.new_error(0, "cel.bind takes three arguments"))?;
    let Expr::Ident(var) = name.expr else {
        return Err(helper.new_error(name.id, "cel.bind's first argument is the name to bind"));
    };
    let bound = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.clone(),
        accu_init: value,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(var)),
        result,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bound)))))
}

impl Selector {
    pub fn compile(expression: &str) -> Result<Self, SelectorError> {
        let err = |message: String| SelectorError { expression: expression.to_string(), message };
        if expression.len() > MAX_LENGTH {
            return Err(err(format!(
                "{} bytes long; a device selector may have at most {MAX_LENGTH}, as in Kubernetes",
                expression.len()
            )));
        }
        let program = env().compile(expression).map_err(|e| err(e.to_string()))?;
        let (cost, _) = worst_cost(program.expression());
        if cost > MAX_COST {
            return Err(err(format!(
                "evaluating it may take about {cost} steps per device, more than the {MAX_COST} Kubernetes allows a \
                 device selector; nest fewer macros (all, exists, map, filter) or loop over shorter lists"
            )));
        }
        let mut reads = Some(Vec::new());
        let mut domains = Vec::new();
        walk(program.expression(), &mut reads, &mut domains);
        if let Some(r) = &mut reads {
            r.sort_by_key(|p| format!("{p:?}"));
            r.dedup();
        }
        domains.sort();
        domains.dedup();
        Ok(Self { expression: expression.to_string(), program, reads, domains })
    }

    /// What `device` has on each path this selector reads: two devices with the same reads
    /// match alike. None when the expression reads `device` in a way this cannot follow.
    pub(crate) fn reads<'a>(&'a self, device: &'a PublishedDevice) -> Option<impl Iterator<Item = Read<'a>> + 'a> {
        let paths = self.reads.as_ref()?;
        Some(paths.iter().map(move |p| match p {
            DevicePath::Driver => Read::Text(&device.driver),
            DevicePath::Entry(part, domain, id, qualified) => {
                let own = *domain == device.driver;
                match part {
                    Part::Attributes => {
                        entry(&device.attributes, own, id, qualified).map_or(Read::Absent, Read::Attribute)
                    }
                    Part::Capacity => {
                        entry(&device.capacity, own, id, qualified).map_or(Read::Absent, |q| Read::Text(q))
                    }
                }
            }
        }))
    }

    /// Whether `device` matches. Any result but a boolean is an error, which names the expression.
    pub fn accepts(&self, device: &PublishedDevice) -> Result<bool, String> {
        thread_local! {
            static ROOT: Context<'static, 'static> = root_context();
        }
        ROOT.with(|root| self.matches(root, device))
    }

    /// Whether `device` matches, in `root` (a context with the environment's functions). Any
    /// result but a boolean is an error, which names the expression.
    pub(crate) fn matches(&self, root: &Context, device: &PublishedDevice) -> Result<bool, String> {
        let mut scope = root.new_inner_scope();
        scope.add_variable_from_value("device", self.device_value(device));
        match self.program.execute(&scope) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("selector {:?} gave {other:?}, not a boolean", self.expression)),
            Err(e) => Err(format!("selector {:?} failed on device {}: {e}", self.expression, device.name)),
        }
    }

    /// The device's value, with an empty map for each domain the expression names that the
    /// device has none of.
    fn device_value(&self, device: &PublishedDevice) -> Value {
        let value = device.cel_value();
        let Value::Map(map) = value else { return value.clone() };
        let missing: Vec<&(Part, String)> = (self.domains.iter())
            .filter(|(part, domain)| match map.map.get(&Key::from(part_key(*part))) {
                Some(Value::Map(inner)) => !inner.map.contains_key(&Key::from(domain.clone())),
                _ => true,
            })
            .collect();
        if missing.is_empty() {
            return value.clone();
        }
        let mut device_map: HashMap<Key, Value> = (*map.map).clone();
        for (part, domain) in missing {
            let key = Key::from(part_key(*part));
            let mut inner = match device_map.get(&key) {
                Some(Value::Map(m)) => (*m.map).clone(),
                _ => HashMap::new(),
            };
            inner.insert(domain.clone().into(), Value::from(HashMap::<String, Value>::new()));
            device_map.insert(key, Value::Map(cel::objects::Map { map: Arc::new(inner) }));
        }
        Value::Map(cel::objects::Map { map: Arc::new(device_map) })
    }
}

/// The entry named `id` (for the driver's `own` domain, as most drivers write it) or by its
/// qualified name.
fn entry<'m, V>(m: &'m BTreeMap<String, V>, own: bool, id: &str, qualified: &str) -> Option<&'m V> {
    own.then(|| m.get(id)).flatten().or_else(|| m.get(qualified))
}

fn part_key(part: Part) -> &'static str {
    match part {
        Part::Attributes => "attributes",
        Part::Capacity => "capacity",
    }
}

/// The root context selectors run in: the standard library and Kubernetes' `quantity` and
/// `semver` values with their comparisons.
pub(crate) fn root_context() -> Context<'static, 'static> {
    let mut ctx = Context::with_env(env());
    let _ = ctx.add_function("quantity", |s: Arc<String>| -> Result<Value, ExecutionError> {
        Quantity::parse(&s)
            .map(Quantity::into_value)
            .ok_or_else(|| ExecutionError::function_error("quantity", format!("{s:?} is not a quantity")))
    });
    let _ = ctx.add_function("semver", |s: Arc<String>| -> Result<Value, ExecutionError> {
        Semver::parse(&s)
            .map(Semver::into_value)
            .ok_or_else(|| ExecutionError::function_error("semver", format!("{s:?} is not a semantic version")))
    });
    let _ = ctx.add_function("compareTo", |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
        compare("compareTo", &a, &b).map(|o| o as i64)
    });
    let _ = ctx.add_function("isGreaterThan", |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
        compare("isGreaterThan", &a, &b).map(|o| o == Ordering::Greater)
    });
    let _ = ctx.add_function("isLessThan", |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
        compare("isLessThan", &a, &b).map(|o| o == Ordering::Less)
    });
    let _ = ctx.add_function("asInteger", |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
        let q = a
            .downcast_ref::<Quantity>()
            .ok_or_else(|| ExecutionError::function_error("asInteger", "not a quantity"))?;
        if q.milli % 1000 != 0 {
            return Err(ExecutionError::function_error("asInteger", "the quantity is not a whole number"));
        }
        i64::try_from(q.milli / 1000).map_err(|_| ExecutionError::function_error("asInteger", "too large"))
    });
    for (name, part) in [("major", 0), ("minor", 1), ("patch", 2)] {
        let _ = ctx.add_function(name, move |This(a): This<Arc<dyn Opaque>>| -> Result<i64, ExecutionError> {
            let v = a
                .downcast_ref::<Semver>()
                .ok_or_else(|| ExecutionError::function_error(name, "not a semantic version"))?;
            let n = [v.0.major, v.0.minor, v.0.patch][part];
            i64::try_from(n).map_err(|_| ExecutionError::function_error(name, "too large"))
        });
    }
    ctx
}

/// Orders two quantities or two versions.
fn compare(function: &str, a: &Arc<dyn Opaque>, b: &Arc<dyn Opaque>) -> Result<Ordering, ExecutionError> {
    if let (Some(x), Some(y)) = (a.downcast_ref::<Quantity>(), b.downcast_ref::<Quantity>()) {
        return Ok(x.milli.cmp(&y.milli));
    }
    if let (Some(x), Some(y)) = (a.downcast_ref::<Semver>(), b.downcast_ref::<Semver>()) {
        return Ok(x.0.cmp_precedence(&y.0));
    }
    Err(ExecutionError::function_error(function, "compares two quantities or two semantic versions"))
}

/// A Kubernetes quantity in CEL, compared to the thousandth (`quantity("80Gi")`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantity {
    milli: u64,
}

impl Quantity {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        parse_scaled(text, 1000).ok().map(|milli| Self { milli })
    }

    pub(crate) fn into_value(self) -> Value {
        Value::Opaque(Arc::new(self))
    }
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version in CEL (`semver("1.2.3")`), ordered by precedence (build metadata aside).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Semver(semver::Version);

impl Semver {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        semver::Version::parse(text).ok().map(Self)
    }

    pub(crate) fn into_value(self) -> Value {
        Value::Opaque(Arc::new(self))
    }
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

/// Collects the fixed paths `e` reads of `device` into `reads` (None once it reads it any other
/// way) and the domains it names into `domains`.
/// The longest device selector Kubernetes accepts, in bytes (`resource.k8s.io`,
/// `SelectorExpressionMaxLength`).
const MAX_LENGTH: usize = 10 * 1024;

/// The most a selector may cost per device: Kubernetes' `SelectorExpressionMaxCost`. A tenant's
/// selector is evaluated once per device the matcher looks at; nested macros multiply.
const MAX_COST: u64 = 1_000_000;

/// How many elements a list or map is taken to have when its length is not written out: more
/// than the attributes and capacities a device may publish (32 in all).
const UNKNOWN_LENGTH: u64 = 64;

/// An upper bound on the steps evaluating `e` takes, and on the elements of what it yields (for
/// a collection): a macro's body counts once per element of its range.
fn worst_cost(e: &Expression) -> (u64, u64) {
    let sum = |parts: &mut dyn Iterator<Item = &Expression>| {
        parts.fold(1u64, |total, p| total.saturating_add(worst_cost(p).0))
    };
    match &e.expr {
        Expr::Comprehension(c) => {
            let (range_cost, range_len) = worst_cost(&c.iter_range);
            let per_element = worst_cost(&c.loop_cond).0.saturating_add(worst_cost(&c.loop_step).0);
            let cost = range_cost
                .saturating_add(worst_cost(&c.accu_init).0)
                .saturating_add(range_len.saturating_mul(per_element))
                .saturating_add(worst_cost(&c.result).0);
            (cost, range_len)
        }
        Expr::List(l) => (sum(&mut l.elements.iter()), l.elements.len() as u64),
        Expr::Map(m) => {
            let mut parts = m.entries.iter().filter_map(|entry| match &entry.expr {
                cel::common::ast::EntryExpr::MapEntry(me) => Some([&me.key, &me.value]),
                _ => None,
            });
            (sum(&mut parts.by_ref().flatten()), m.entries.len() as u64)
        }
        Expr::Struct(st) => {
            let mut parts = st.entries.iter().filter_map(|entry| match &entry.expr {
                cel::common::ast::EntryExpr::StructField(f) => Some(&f.value),
                _ => None,
            });
            (sum(&mut parts), UNKNOWN_LENGTH)
        }
        Expr::Call(c) => (sum(&mut c.target.iter().map(|t| &**t).chain(&c.args)), UNKNOWN_LENGTH),
        Expr::Select(sel) => (worst_cost(&sel.operand).0.saturating_add(1), UNKNOWN_LENGTH),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => (1, UNKNOWN_LENGTH),
    }
}

fn walk(e: &Expression, reads: &mut Option<Vec<DevicePath>>, domains: &mut Vec<(Part, String)>) {
    if let Some(path) = device_path(&e.expr) {
        if let DevicePath::Entry(part, domain, ..) = &path {
            domains.push((*part, domain.clone()));
        }
        if let Some(r) = reads {
            r.push(path);
        }
        return;
    }
    if let Some((part, domain)) = domain_map(&e.expr) {
        // The domain's whole map (`"x" in device.attributes["d"]`): named, but not a fixed read.
        domains.push((part, domain));
        *reads = None;
        return;
    }
    match &e.expr {
        Expr::Ident(name) if name == "device" => *reads = None,
        Expr::Call(c) => {
            for a in c.target.iter().map(|t| &**t).chain(&c.args) {
                walk(a, reads, domains);
            }
        }
        Expr::Select(s) => walk(&s.operand, reads, domains),
        Expr::Comprehension(c) => {
            for a in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(a, reads, domains);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, reads, domains)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                    walk(&me.key, reads, domains);
                    walk(&me.value, reads, domains);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                    walk(&f.value, reads, domains);
                }
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// `device.driver`, or `device.attributes["domain"].id` / `["domain"]["id"]` (and capacity),
/// tested (`has(...)`) or not.
fn device_path(e: &Expr) -> Option<DevicePath> {
    let (inner, id) = match e {
        Expr::Select(s) if is_device(&s.operand.expr) && s.field == "driver" && !s.test => {
            return Some(DevicePath::Driver);
        }
        Expr::Select(s) => (&s.operand.expr, s.field.clone()),
        Expr::Call(c) if c.func_name == operators::INDEX && c.args.len() == 2 => {
            (&c.args[0].expr, string_literal(&c.args[1].expr)?)
        }
        _ => return None,
    };
    let (part, domain) = domain_map(inner)?;
    let qualified = format!("{domain}/{id}");
    Some(DevicePath::Entry(part, domain, id, qualified))
}

/// `device.attributes["domain"]` or `device.capacity["domain"]`.
fn domain_map(e: &Expr) -> Option<(Part, String)> {
    let Expr::Call(c) = e else { return None };
    if c.func_name != operators::INDEX || c.args.len() != 2 {
        return None;
    }
    let Expr::Select(s) = &c.args[0].expr else { return None };
    if !is_device(&s.operand.expr) || s.test {
        return None;
    }
    let part = match s.field.as_str() {
        "attributes" => Part::Attributes,
        "capacity" => Part::Capacity,
        _ => return None,
    };
    Some((part, string_literal(&c.args[1].expr)?))
}

fn is_device(e: &Expr) -> bool {
    matches!(e, Expr::Ident(n) if n == "device")
}

fn string_literal(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_string()),
        _ => None,
    }
}
