//! Medians and paired measurements that alternate their variants.
//!
//! On a shared, noisy machine two figures measured minutes apart are not comparable. A
//! [`Paired`] run measures every variant in every round, in a rotating order (A B C, then
//! B C A, ...), and reports per variant the median time per operation over the rounds, and per
//! variant the median over the rounds of the *same-round* ratio to the first variant.

use std::time::{Duration, Instant};

/// Returns the median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "median of nothing");
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Returns the `q` quantile (0..=1) of `values`, nearest rank.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let idx = ((v.len() - 1) as f64 * q).round() as usize;
    v[idx]
}

/// One variant of a paired measurement: a name and one operation.
pub struct Variant<'a> {
    /// Shown in the table.
    pub name: String,
    /// Runs one operation.
    pub op: Box<dyn FnMut() + 'a>,
}

impl<'a> Variant<'a> {
    /// Builds a variant.
    pub fn new(name: impl Into<String>, op: impl FnMut() + 'a) -> Variant<'a> {
        Variant {
            name: name.into(),
            op: Box::new(op),
        }
    }
}

/// The result for one variant.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The variant's name.
    pub name: String,
    /// Median time per operation over the rounds.
    pub median: Duration,
    /// Per-round times per operation.
    pub rounds: Vec<Duration>,
    /// Median over the rounds of this variant's time divided by the first variant's time in the
    /// same round (1.0 for the first variant).
    pub ratio_to_first: f64,
    /// The 25% and 75% quantiles of those per-round ratios.
    pub ratio_iqr: (f64, f64),
}

/// Runs `rounds` rounds of `batch` operations of each variant, rotating the order each round,
/// and returns one figure per variant.
pub fn paired(variants: &mut [Variant<'_>], rounds: usize, batch: usize) -> Vec<Figure> {
    let k = variants.len();
    let mut times = vec![Vec::with_capacity(rounds); k];
    for round in 0..rounds {
        for j in 0..k {
            let v = (round + j) % k;
            let op = &mut variants[v].op;
            let start = Instant::now();
            for _ in 0..batch {
                op();
            }
            times[v].push(start.elapsed() / batch as u32);
        }
    }
    (0..k)
        .map(|v| {
            let ratios: Vec<f64> = (0..rounds)
                .map(|r| times[v][r].as_secs_f64() / times[0][r].as_secs_f64())
                .collect();
            let secs: Vec<f64> = times[v].iter().map(Duration::as_secs_f64).collect();
            Figure {
                name: variants[v].name.clone(),
                median: Duration::from_secs_f64(median(&secs)),
                rounds: times[v].clone(),
                ratio_to_first: median(&ratios),
                ratio_iqr: (quantile(&ratios, 0.25), quantile(&ratios, 0.75)),
            }
        })
        .collect()
}

/// Formats a duration for a table: µs below 10 ms, ms above.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10_000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.1} ms", us / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.25), 2.0);
    }

    #[test]
    fn paired_runs_every_variant_every_round() {
        let mut a = 0;
        let mut b = 0;
        let figs = {
            let mut vs = [Variant::new("a", || a += 1), Variant::new("b", || b += 1)];
            paired(&mut vs, 5, 3)
        };
        assert_eq!((a, b), (15, 15));
        assert_eq!(figs[0].ratio_to_first, 1.0);
        assert_eq!(figs[1].rounds.len(), 5);
    }
}
