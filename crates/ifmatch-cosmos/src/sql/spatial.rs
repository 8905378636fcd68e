//! The spatial functions over GeoJSON (`Point`, `LineString`, `Polygon`, `MultiPolygon`),
//! as geography: longitude and latitude in degrees on the WGS-84 ellipsoid. Distances between
//! points are geodesics on the ellipsoid (Vincenty's inverse formula), other distances the
//! least between their vertices; areas are those of great-circle polygons on the authalic
//! sphere (latitudes made authalic), which is how Cosmos measures them;
//! containment and intersection are judged with edges as straight lines in longitude and
//! latitude, which is what a polygon of a few kilometres needs. Each function charges the
//! meter for the vertices it reads.

use serde_json::{Map, Value as Json};

use super::catalog::Function;
use super::meter::Meter;
use super::value::Value;

/// WGS-84: the semi-major axis and the flattening.
const A: f64 = 6_378_137.0;
const F: f64 = 1.0 / 298.257_223_563;
/// The radius of the sphere of the ellipsoid's area.
const AUTHALIC: f64 = 6_371_007.180_918_475;

type Point = (f64, f64);

/// A geometry read from GeoJSON: its rings or lines of points.
enum Shape {
    Point(Point),
    Line(Vec<Point>),
    /// Polygons: each its outer ring, then its holes.
    Polygons(Vec<Vec<Vec<Point>>>),
}

/// The most points one geometry a spatial function reads may have (Azure's account says so,
/// `spatialMaxGeometryPointCount`, and refuses the query past it).
pub(crate) const MAX_POINTS: usize = 256;

pub(crate) fn call(name: Function, args: &[Value<'_>], meter: &Meter) -> Option<Json> {
    let geometry = |at: usize| args.get(at)?.as_deref();
    // A geometry past the points served refuses the query (a validity check says why).
    let served = |value: &Json, meter: &Meter| {
        let shape = shape(value, meter)?;
        match points(&shape) {
            n if n > MAX_POINTS => {
                meter.refuse(too_many(n));
                None
            }
            _ => Some(shape),
        }
    };
    match name {
        Function::ST_ISVALID => Some(Json::Bool(check(geometry(0)?, meter).is_ok())),
        Function::ST_ISVALIDDETAILED => {
            let mut out = Map::new();
            match check(geometry(0)?, meter) {
                Ok(()) => {
                    out.insert("valid".into(), Json::Bool(true));
                }
                Err(reason) => {
                    out.insert("valid".into(), Json::Bool(false));
                    out.insert("reason".into(), Json::String(reason));
                }
            }
            Some(Json::Object(out))
        }
        Function::ST_AREA => {
            let Shape::Polygons(polygons) = served(geometry(0)?, meter)? else {
                return Some(Json::from(0));
            };
            let area: f64 = polygons
                .iter()
                .map(|rings| {
                    let mut rings = rings.iter().map(|ring| ring_area(ring).abs());
                    let outer = rings.next().unwrap_or(0.0);
                    outer - rings.sum::<f64>()
                })
                .sum();
            super::value::num(area)
        }
        Function::ST_DISTANCE => {
            let (a, b) = (served(geometry(0)?, meter)?, served(geometry(1)?, meter)?);
            if intersects(&a, &b) {
                return Some(Json::from(0));
            }
            let distance = vertices(&a)
                .iter()
                .flat_map(|p| vertices(&b).into_iter().map(move |q| geodesic(*p, q)))
                .fold(f64::INFINITY, f64::min);
            super::value::num(distance)
        }
        Function::ST_WITHIN => {
            let (a, b) = (served(geometry(0)?, meter)?, served(geometry(1)?, meter)?);
            let Shape::Polygons(polygons) = &b else {
                return Some(Json::Bool(false));
            };
            let inside = vertices(&a).iter().all(|p| in_polygons(*p, polygons));
            Some(Json::Bool(inside))
        }
        Function::ST_INTERSECTS => {
            let (a, b) = (served(geometry(0)?, meter)?, served(geometry(1)?, meter)?);
            Some(Json::Bool(intersects(&a, &b)))
        }
        _ => None,
    }
}

/// A position: `[longitude, latitude]` (more numbers, an altitude, are allowed).
fn position(value: &Json) -> Option<Point> {
    let items = value.as_array()?;
    let (lon, lat) = (items.first()?.as_f64()?, items.get(1)?.as_f64()?);
    ((-180.0..=180.0).contains(&lon) && (-90.0..=90.0).contains(&lat)).then_some((lon, lat))
}

fn positions(value: &Json, meter: &Meter) -> Option<Vec<Point>> {
    let items = value.as_array()?;
    meter.take(16 * items.len())?;
    items.iter().map(position).collect()
}

/// A ring: four positions or more, the last the first.
fn ring(value: &Json, meter: &Meter) -> Option<Vec<Point>> {
    let ring = positions(value, meter)?;
    (ring.len() >= 4 && ring.first() == ring.last()).then_some(ring)
}

fn polygon(value: &Json, meter: &Meter) -> Option<Vec<Vec<Point>>> {
    let rings = value.as_array()?;
    if rings.is_empty() {
        return None;
    }
    rings.iter().map(|r| ring(r, meter)).collect()
}

fn shape(value: &Json, meter: &Meter) -> Option<Shape> {
    let coordinates = value.get("coordinates")?;
    match value.get("type")?.as_str()? {
        "Point" => Some(Shape::Point(position(coordinates)?)),
        "LineString" => {
            let line = positions(coordinates, meter)?;
            (line.len() >= 2).then_some(Shape::Line(line))
        }
        "Polygon" => Some(Shape::Polygons(vec![polygon(coordinates, meter)?])),
        "MultiPolygon" => Some(Shape::Polygons(
            (coordinates.as_array()?.iter())
                .map(|p| polygon(p, meter))
                .collect::<Option<_>>()?,
        )),
        _ => None,
    }
}

/// Why `value` is no valid geometry, in words.
fn check(value: &Json, meter: &Meter) -> Result<(), String> {
    let kind = value.get("type").and_then(Json::as_str);
    match kind {
        Some("Point" | "LineString" | "Polygon" | "MultiPolygon") => {}
        Some(other) => return Err(format!("The type '{other}' is not a geometry served.")),
        None => return Err("A geometry has a type.".into()),
    }
    if value.get("coordinates").is_none() {
        return Err("A geometry has coordinates.".into());
    }
    let coordinates = &value["coordinates"];
    let ranges = |p: &Json| -> Result<(), String> {
        let (lon, lat) = (
            p.get(0).and_then(Json::as_f64),
            p.get(1).and_then(Json::as_f64),
        );
        if lat.is_some_and(|lat| !(-90.0..=90.0).contains(&lat)) {
            return Err("Latitude values must be between -90 and 90 degrees.".into());
        }
        if lon.is_some_and(|lon| !(-180.0..=180.0).contains(&lon)) {
            return Err("Longitude values must be between -180 and 180 degrees.".into());
        }
        Ok(())
    };
    if kind == Some("Point") {
        ranges(coordinates)?;
    }
    match shape(value, meter) {
        Some(shape) if points(&shape) > MAX_POINTS => Err(too_many(points(&shape))),
        Some(_) => Ok(()),
        None => Err(match kind {
            Some("Point") => "A point is [longitude, latitude], two numbers.",
            Some("LineString") => "A line has two positions or more, each within range.",
            _ => "A polygon's rings have four positions or more, within range, the last the same as the first.",
        }
        .into()),
    }
}

/// The positions `shape` holds, each ring's closing one included.
fn points(shape: &Shape) -> usize {
    match shape {
        Shape::Point(_) => 1,
        Shape::Line(line) => line.len(),
        Shape::Polygons(polygons) => polygons.iter().flatten().map(Vec::len).sum(),
    }
}

fn too_many(points: usize) -> String {
    format!("A geometry has at most {MAX_POINTS} points; this one has {points}.")
}

fn vertices(shape: &Shape) -> Vec<Point> {
    match shape {
        Shape::Point(p) => vec![*p],
        Shape::Line(line) => line.clone(),
        Shape::Polygons(polygons) => polygons.iter().flatten().flatten().copied().collect(),
    }
}

fn edges(shape: &Shape) -> Vec<(Point, Point)> {
    let pairs = |line: &Vec<Point>| line.windows(2).map(|w| (w[0], w[1])).collect::<Vec<_>>();
    match shape {
        Shape::Point(_) => Vec::new(),
        Shape::Line(line) => pairs(line),
        Shape::Polygons(polygons) => polygons.iter().flatten().flat_map(pairs).collect(),
    }
}

fn intersects(a: &Shape, b: &Shape) -> bool {
    let inside = |x: &Shape, y: &Shape| match y {
        Shape::Polygons(polygons) => vertices(x).iter().any(|p| in_polygons(*p, polygons)),
        _ => false,
    };
    if inside(a, b) || inside(b, a) {
        return true;
    }
    if let (Shape::Point(p), Shape::Point(q)) = (a, b) {
        return p == q;
    }
    let (ea, eb) = (edges(a), edges(b));
    let on = |p: Point, edges: &[(Point, Point)]| {
        edges
            .iter()
            .any(|(s, t)| cross(*s, *t, p) == 0.0 && between(*s, *t, p))
    };
    match (a, b) {
        (Shape::Point(p), _) => on(*p, &eb),
        (_, Shape::Point(q)) => on(*q, &ea),
        _ => ea
            .iter()
            .any(|(p, q)| eb.iter().any(|(r, s)| segments_cross(*p, *q, *r, *s))),
    }
}

fn cross(o: Point, a: Point, b: Point) -> f64 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

fn between(a: Point, b: Point, p: Point) -> bool {
    p.0 >= a.0.min(b.0) && p.0 <= a.0.max(b.0) && p.1 >= a.1.min(b.1) && p.1 <= a.1.max(b.1)
}

fn segments_cross(p: Point, q: Point, r: Point, s: Point) -> bool {
    let (d1, d2) = (cross(r, s, p), cross(r, s, q));
    let (d3, d4) = (cross(p, q, r), cross(p, q, s));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    (d1 == 0.0 && between(r, s, p))
        || (d2 == 0.0 && between(r, s, q))
        || (d3 == 0.0 && between(p, q, r))
        || (d4 == 0.0 && between(p, q, s))
}

/// Whether `p` is inside a ring (even-odd crossings of a ray to the east).
fn in_ring(p: Point, ring: &[Point]) -> bool {
    let mut inside = false;
    for w in ring.windows(2) {
        let ((x1, y1), (x2, y2)) = (w[0], w[1]);
        if (y1 > p.1) != (y2 > p.1) && p.0 < (x2 - x1) * (p.1 - y1) / (y2 - y1) + x1 {
            inside = !inside;
        }
    }
    inside
}

/// Whether `p` is inside one of `polygons`: in its outer ring and in none of its holes.
fn in_polygons(p: Point, polygons: &[Vec<Vec<Point>>]) -> bool {
    polygons.iter().any(|rings| {
        let mut rings = rings.iter();
        rings.next().is_some_and(|outer| in_ring(p, outer)) && !rings.any(|hole| in_ring(p, hole))
    })
}

/// A ring's area, in square metres (signed by its winding): the exact spherical excess of its
/// great-circle edges, on the authalic sphere, its latitudes made authalic.
fn ring_area(ring: &[Point]) -> f64 {
    let excess: f64 = ring
        .windows(2)
        .map(|w| {
            let ((l1, f1), (l2, f2)) = (w[0], w[1]);
            let (t1, t2) = ((authalic(f1) / 2.0).tan(), (authalic(f2) / 2.0).tan());
            let dl = (l2 - l1).to_radians();
            2.0 * ((dl / 2.0).tan() * (t1 + t2)).atan2(1.0 + t1 * t2)
        })
        .sum();
    excess * AUTHALIC * AUTHALIC
}

/// The authalic latitude, in radians, of a geodetic latitude in degrees: the latitude on the
/// sphere of the same area that bounds the same area towards the pole.
fn authalic(latitude: f64) -> f64 {
    let e2 = F * (2.0 - F);
    let e = e2.sqrt();
    let q = |sin: f64| {
        (1.0 - e2)
            * (sin / (1.0 - e2 * sin * sin) - ((1.0 - e * sin) / (1.0 + e * sin)).ln() / (2.0 * e))
    };
    (q(latitude.to_radians().sin()) / q(1.0))
        .clamp(-1.0, 1.0)
        .asin()
}

/// The geodesic distance between two points on WGS-84, in metres (Vincenty's inverse
/// formula; the spherical distance where it does not converge, between near-antipodes).
fn geodesic(p: Point, q: Point) -> f64 {
    let b = A * (1.0 - F);
    let l = (q.0 - p.0).to_radians();
    let u1 = ((1.0 - F) * p.1.to_radians().tan()).atan();
    let u2 = ((1.0 - F) * q.1.to_radians().tan()).atan();
    let (sin_u1, cos_u1) = u1.sin_cos();
    let (sin_u2, cos_u2) = u2.sin_cos();
    let mut lambda = l;
    for _ in 0..200 {
        let (sin_l, cos_l) = lambda.sin_cos();
        let sin_sigma =
            ((cos_u2 * sin_l).powi(2) + (cos_u1 * sin_u2 - sin_u1 * cos_u2 * cos_l).powi(2)).sqrt();
        if sin_sigma == 0.0 {
            return 0.0;
        }
        let cos_sigma = sin_u1 * sin_u2 + cos_u1 * cos_u2 * cos_l;
        let sigma = sin_sigma.atan2(cos_sigma);
        let sin_alpha = cos_u1 * cos_u2 * sin_l / sin_sigma;
        let cos2_alpha = 1.0 - sin_alpha * sin_alpha;
        let cos_2sm = if cos2_alpha == 0.0 {
            0.0
        } else {
            cos_sigma - 2.0 * sin_u1 * sin_u2 / cos2_alpha
        };
        let c = F / 16.0 * cos2_alpha * (4.0 + F * (4.0 - 3.0 * cos2_alpha));
        let previous = lambda;
        lambda = l
            + (1.0 - c)
                * F
                * sin_alpha
                * (sigma
                    + c * sin_sigma * (cos_2sm + c * cos_sigma * (-1.0 + 2.0 * cos_2sm * cos_2sm)));
        if (lambda - previous).abs() < 1e-12 {
            let u2 = cos2_alpha * (A * A - b * b) / (b * b);
            let big_a = 1.0 + u2 / 16384.0 * (4096.0 + u2 * (-768.0 + u2 * (320.0 - 175.0 * u2)));
            let big_b = u2 / 1024.0 * (256.0 + u2 * (-128.0 + u2 * (74.0 - 47.0 * u2)));
            let delta = big_b
                * sin_sigma
                * (cos_2sm
                    + big_b / 4.0
                        * (cos_sigma * (-1.0 + 2.0 * cos_2sm * cos_2sm)
                            - big_b / 6.0
                                * cos_2sm
                                * (-3.0 + 4.0 * sin_sigma * sin_sigma)
                                * (-3.0 + 4.0 * cos_2sm * cos_2sm)));
            return b * big_a * (sigma - delta);
        }
    }
    // Near-antipodal points: the great circle on the authalic sphere.
    let (phi1, phi2) = (p.1.to_radians(), q.1.to_radians());
    let h = ((phi2 - phi1) / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (l / 2.0).sin().powi(2);
    2.0 * AUTHALIC * h.sqrt().asin()
}
