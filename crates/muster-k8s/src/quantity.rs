//! A resource amount as Kubernetes writes it: an integer or a quantity string. One type with the
//! engine's configuration, whose `schema` feature gives it the CRD schema.

pub use muster_queue::config::Quantity;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_in_base_units() {
        assert_eq!(Quantity::from(2).amount("cpu"), Ok(2000));
        assert_eq!(Quantity::from("500m").amount("cpu"), Ok(500));
        assert_eq!(Quantity::from("1Gi").amount("memory"), Ok(1 << 30));
        assert!(Quantity::from(-1).amount("cpu").is_err());
        assert!(Quantity::from("lots").amount("memory").is_err());
        assert!(Quantity::from(1).amount("gpu").is_err(), "unknown resource names are refused");
    }

    #[test]
    fn ints_and_strings_round_trip() {
        let q: Vec<Quantity> = serde_json::from_str(r#"[4, "4Gi"]"#).unwrap();
        assert_eq!(q, [Quantity::Int(4), Quantity::Text("4Gi".into())]);
        assert_eq!(serde_json::to_string(&q).unwrap(), r#"[4,"4Gi"]"#);
    }
}
