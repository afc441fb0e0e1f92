//! Charts of a report, each written as SVG and PNG: utilization over time, job completion curves
//! and wait-time distributions (CDFs), one line per scheduler. Text uses DejaVu Sans from the
//! `dejavu` crate, so no system font library is needed.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::SimError;
use crate::report::Report;

type Series = Vec<(String, Vec<(f64, f64)>)>;

const SIZE: (u32, u32) = (960, 540);
const MAX_POINTS: usize = 2000;

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bundled font is valid; a failure would only leave text out.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS {
        return points;
    }
    let step = points.len().div_ceil(MAX_POINTS);
    let last = *points.last().expect("non-empty");
    let mut out: Vec<(f64, f64)> = points.into_iter().step_by(step).collect();
    out.push(last);
    out
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &Series,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let x_max = series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x)).fold(1.0, f64::max) * 1.02;
    let y_max = series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)).fold(1.0, f64::max) * 1.05;
    root.fill(&WHITE).map_err(e)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(e)?;
    chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).label_style(("sans-serif", 14)).draw().map_err(e)?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(e)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

fn both(dir: &Path, stem: &str, title: &str, x: &str, y: &str, series: &Series) -> Result<Vec<PathBuf>, SimError> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    draw(SVGBackend::new(&svg, SIZE).into_drawing_area(), title, x, y, series).map_err(SimError::Plot)?;
    draw(BitMapBackend::new(&png, SIZE).into_drawing_area(), title, x, y, series).map_err(SimError::Plot)?;
    Ok(vec![svg, png])
}

fn steps(times_s: &[f64]) -> Vec<(f64, f64)> {
    let mut out = vec![(0.0, 0.0)];
    for (k, t) in times_s.iter().enumerate() {
        out.push((t / 60.0, k as f64));
        out.push((t / 60.0, k as f64 + 1.0));
    }
    thin(out)
}

impl Report {
    /// Writes utilization, completions and wait-time charts (SVG and PNG) into `dir`.
    pub fn write_plots(&self, dir: &Path) -> Result<Vec<PathBuf>, SimError> {
        register_font();
        std::fs::create_dir_all(dir)
            .map_err(|e| SimError::Io { path: dir.display().to_string(), message: e.to_string() })?;
        let mut files = vec![];
        let util: Series = self
            .runs
            .iter()
            .map(|r| {
                let u = &r.utilization;
                let pts =
                    u.peak_shares().into_iter().enumerate().map(|(i, v)| (i as f64 * u.sample_s / 60.0, v * 100.0));
                (r.scheduler.clone(), thin(pts.collect()))
            })
            .collect();
        let title = format!("{}: utilization (the most held of cpu, memory, GPUs and other devices)", self.scenario);
        files.extend(both(dir, "utilization", &title, "time (min)", "held (%)", &util)?);
        let mut done: Series = vec![("ideal-fifo".into(), steps(&self.ideal_fifo_gang.completion_times_s))];
        done.extend(self.runs.iter().map(|r| (r.scheduler.clone(), steps(&r.completion_times_s))));
        let title = format!("{}: jobs completed", self.scenario);
        files.extend(both(dir, "completions", &title, "time (min)", "jobs", &done)?);
        let cdf = |w: &[f64]| -> Vec<(f64, f64)> {
            let n = w.len().max(1) as f64;
            thin(w.iter().enumerate().map(|(k, x)| (*x, (k as f64 + 1.0) * 100.0 / n)).collect())
        };
        let waits: Series = self.runs.iter().map(|r| (r.scheduler.clone(), cdf(&r.waits_s))).collect();
        let title = format!("{}: wait time distribution (completed jobs)", self.scenario);
        files.extend(both(dir, "wait-cdf", &title, "wait (s)", "jobs (%)", &waits)?);
        Ok(files)
    }
}
