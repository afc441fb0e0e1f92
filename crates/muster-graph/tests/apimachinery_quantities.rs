//! muster's quantity parser against apimachinery's own (`resource.ParseQuantity`, through the Go
//! helper hack/k8s-build/cmd/muster-quantity): thousands of generated quantities, valid and not,
//! must be refused by both or read as the same amount by both, rounding included, and so must the
//! canonical form the apiserver would store for each. Needs Go (as the control plane does); the
//! first run downloads apimachinery through the Go module proxy.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use muster_graph::quantity::{MAX_AMOUNT, QuantityError, parse_scaled, parse_whole};

/// A small deterministic generator (xorshift64*), so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }

    fn digits(&mut self, most: usize) -> String {
        let n = self.below(most + 1);
        (0..n).map(|_| char::from(b'0' + self.below(10) as u8)).collect()
    }
}

const SUFFIXES: [&str; 16] = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const JUNK: [&str; 12] = ["K", "ki", "e", "E+", "x", " ", "e3m", "Mi3", ".", "-", "mm", "\t"];

/// One quantity-like string: mostly valid forms (with leading zeros, long fractions, exponents of
/// either sign), some with a sign, some with junk where a suffix goes.
fn generate(rng: &mut Rng) -> String {
    let sign = rng.pick(&["", "", "", "", "+", "-"]);
    let zeros = if rng.below(5) == 0 { "000" } else { "" };
    let long = rng.below(4) == 0;
    let int = rng.digits(if long { 24 } else { 6 });
    let frac = match rng.below(4) {
        0 => format!(".{}", rng.digits(14)),
        1 => format!(".{}", rng.digits(3)),
        _ => String::new(),
    };
    let suffix = match rng.below(10) {
        0..=5 => rng.pick(&SUFFIXES).to_string(),
        6..=8 => format!("{}{}{}", rng.pick(&["e", "E"]), rng.pick(&["", "+", "-"]), rng.digits(2)),
        _ => rng.pick(&JUNK).to_string(),
    };
    format!("{sign}{zeros}{int}{frac}{suffix}")
}

/// Hand-picked cases at the edges: MAX_AMOUNT and around it, exponents past 32 bits, lone signs
/// and points.
fn edges() -> Vec<String> {
    let mut out: Vec<String> = [
        "0",
        "-0",
        "+",
        "-",
        ".",
        "+.",
        "m",
        "Ki",
        "1.",
        ".5",
        "1500e6",
        "64e9",
        "2E3",
        "1500u",
        "1n",
        "0.5n",
        "1e-9",
        "1e-10",
        "1Ei",
        "1024Pi",
        "1.5Gi",
        "0.000000001Ki",
        "1e4294967296",
        "1e4294967299",
        "1e-4294967296",
        "1e99999999999999999999",
        "9223372036854775807",
        "9223372036854775808",
        "8Ei",
        "2e18",
        "1152921504606846976e-3",
        "1152921504606846977e-3",
        "1152921504606846975999e-6",
    ]
    .map(String::from)
    .to_vec();
    out.push(MAX_AMOUNT.to_string());
    out.push((MAX_AMOUNT + 1).to_string());
    out
}

/// The helper, built once into cargo's scratch directory.
fn helper() -> PathBuf {
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/k8s-build");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("muster-quantity");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("./cmd/muster-quantity")
        .current_dir(&module)
        .env("GOFLAGS", "-mod=readonly")
        .status()
        .expect("go is needed for this test (install Go 1.24 or newer, as for the control plane)");
    assert!(status.success(), "go build ./cmd/muster-quantity in hack/k8s-build failed");
    out
}

/// apimachinery's reading of each input, a line each (see the helper's doc comment).
fn apimachinery(inputs: &[String]) -> Vec<String> {
    let mut child =
        Command::new(helper()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("start muster-quantity");
    let mut stdin = child.stdin.take().expect("stdin");
    let text: String = inputs.iter().map(|q| format!("{q}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let output = child.wait_with_output().expect("muster-quantity output");
    writer.join().expect("writer").expect("write inputs");
    assert!(output.status.success(), "muster-quantity failed");
    String::from_utf8(output.stdout).expect("utf-8").lines().map(String::from).collect()
}

/// What muster must make of a quantity apimachinery read as `amount` ("big" above MAX_AMOUNT).
fn expected(amount: &str) -> Result<u64, &'static str> {
    match amount {
        "big" => Err("too large"),
        n => Ok(n.parse().expect("an integer")),
    }
}

fn muster(text: &str, scale: u64) -> Result<u64, &'static str> {
    parse_scaled(text, scale).map_err(|e| match e {
        QuantityError::TooLarge(_) => "too large",
        QuantityError::Negative(_) => "negative",
        QuantityError::Empty | QuantityError::Malformed(_) => "refused",
        QuantityError::Fractional(_) => unreachable!("parse_scaled rounds a fraction up"),
    })
}

#[test]
fn muster_reads_every_quantity_as_apimachinery_does() {
    let mut rng = Rng(0x6d75_7374_6572_0001);
    let mut inputs = edges();
    inputs.extend((0..20_000).map(|_| generate(&mut rng)));
    let answers = apimachinery(&inputs);
    assert_eq!(answers.len(), inputs.len(), "one answer per quantity");
    let (mut accepted, mut canonical_forms) = (0, Vec::new());
    let mut disagreements = Vec::new();
    for (text, answer) in inputs.iter().zip(&answers) {
        let fields: Vec<&str> = answer.split(' ').collect();
        let want: [Result<u64, &str>; 2] = match fields.as_slice() {
            ["error"] => [Err("refused"), Err("refused")],
            ["ok", "-1", "-", "-", _] => [Err("negative"), Err("negative")],
            ["ok", _, value, milli, _] => [expected(value), expected(milli)],
            _ => panic!("unexpected answer {answer:?} for {text:?}"),
        };
        let got = [muster(text, 1), muster(text, 1000)];
        if got != want {
            disagreements.push(format!("{text:?}: apimachinery {want:?}, muster {got:?}"));
        }
        // Kubernetes takes a count of an extended resource only whole (its milli-value a multiple
        // of 1000): muster's whole-unit reading must refuse exactly the others.
        if let ["ok", "1" | "0", value, milli, _] = fields.as_slice()
            && let (Ok(value), Ok(milli)) = (expected(value), expected(milli))
        {
            let whole = parse_whole(text).map_err(|e| matches!(e, QuantityError::Fractional(_)));
            let want = if milli % 1000 == 0 { Ok(value) } else { Err(true) };
            if whole != want {
                disagreements.push(format!("{text:?} as a whole count: apimachinery {want:?}, muster {whole:?}"));
            }
        }
        if let ["ok", sign, value, milli, canonical] = fields.as_slice() {
            accepted += 1;
            if *sign != "-1" {
                canonical_forms.push((canonical.to_string(), expected(value), expected(milli)));
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements, first: {:#?}",
        disagreements.len(),
        &disagreements[..10.min(disagreements.len())]
    );
    assert!(
        accepted > inputs.len() / 2,
        "the generator makes mostly valid quantities ({accepted} of {})",
        inputs.len()
    );
    // The apiserver sends the canonical form: it must read as the original did.
    for (canonical, value, milli) in canonical_forms {
        assert_eq!([muster(&canonical, 1), muster(&canonical, 1000)], [value, milli], "canonical form {canonical:?}");
    }
}
