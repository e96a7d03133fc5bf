//! The Prometheus client of the gates and need conditions: requests bounded in time, in number
//! at once and in the size of their answers (a tenant writes a need query).

use super::*;

/// Longest a Prometheus request may take.
pub(super) const PROMETHEUS_TIMEOUT: StdDuration = StdDuration::from_secs(5);
/// The largest answer of a need query read, in bytes. A need query answers one figure per
/// target (its `max`, a few pods' values): a few KiB. 1 MiB leaves room for a query over a
/// large namespace while four answers at once (below) stay a few MiB of the chart's 256 Mi;
/// Prometheus's own cap is far larger, and a tenant writes the query.
pub const NEED_ANSWER_BYTES: u64 = 1024 * 1024;
/// The most samples of a need query's answer kept; more is an unknown answer. Small samples
/// (`{"metric":{},"value":[0,"1"]}`) fit 30,000 in [`NEED_ANSWER_BYTES`]: this caps them too.
pub const NEED_ANSWER_SERIES: usize = 10_000;
/// Requests to Prometheus (alert gates and need queries) in flight at once in the whole
/// process: a burst of due slots (128 passes at once) holds at most this many answers in memory,
/// and Prometheus sees a few requests, not a storm.
pub(super) const PROMETHEUS_REQUESTS: usize = 4;

impl Gatekeeper {
    /// The values of the samples `query` answers now (a vector's, or a scalar), from the cache or
    /// a request to `--prometheus-url`.
    pub(super) async fn samples(&self, query: &str) -> Result<Vec<f64>, String> {
        let (Some(url), Some(agent)) = (&self.options.prometheus_url, &self.agent) else {
            return Err("no --prometheus-url: the need query cannot be asked".into());
        };
        let ttl = self.options.cache_ttl;
        if let Some(answer) = self.queries.get(query, ttl) {
            return answer;
        }
        let _permit = self.prometheus.acquire().await.map_err(|e| e.to_string())?;
        // another pass may have asked the same query while this one waited for its permit
        if let Some(answer) = self.queries.get(query, ttl) {
            return answer;
        }
        let endpoint = format!("{}/api/v1/query", url.trim_end_matches('/'));
        let (agent, sent) = (agent.clone(), query.to_string());
        let answer = tokio::task::spawn_blocking(move || fetch_samples(&agent, &endpoint, &sent))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
        self.queries.keep(query.to_string(), answer, ttl)
    }
}

/// GET Prometheus's `/api/v1/query` for `query`: the values of the vector's samples (or the
/// scalar). Errors name the URL without credentials or query string, as [`fetch`]'s. The answer
/// is read up to [`NEED_ANSWER_BYTES`] and parsed into [`Samples`], never into a whole JSON tree.
fn fetch_samples(agent: &ureq::Agent, endpoint: &str, query: &str) -> Result<Vec<f64>, String> {
    let refuse = |e: &dyn std::fmt::Display| {
        let shown = redact_url(endpoint);
        format!("asking Prometheus at {shown} failed: {e}").replace(endpoint, &shown)
    };
    let mut response = (agent.get(endpoint).query("query", query).call()).map_err(|e| refuse(&e))?;
    let body = response
        .body_mut()
        .with_config()
        .limit(NEED_ANSWER_BYTES)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => format!(
                "the need query answered more than {} KiB; narrow it (an aggregation such as max)",
                NEED_ANSWER_BYTES / 1024
            ),
            e => refuse(&e),
        })?;
    samples_of(&body).map_err(|e| e.unwrap_or_else(|e| refuse(&e)))
}

/// The values of a `/api/v1/query` answer: `Err(Ok(why))` for an answer read whole that is not
/// a vector or a scalar, or holds more than [`NEED_ANSWER_SERIES`] samples; `Err(Err(e))` for
/// one that is not Prometheus's JSON.
fn samples_of(body: &[u8]) -> Result<Vec<f64>, Result<String, serde_json::Error>> {
    let answer: QueryAnswer = serde_json::from_slice(body).map_err(|e| match e.is_data() {
        true if e.to_string().starts_with(TOO_MANY) => Ok(format!(
            "the need query answered more than {NEED_ANSWER_SERIES} series; narrow it (an aggregation such as max)"
        )),
        _ => Err(e),
    })?;
    match answer.data {
        Some(QueryData::Vector(Samples(values))) => Ok(values),
        Some(QueryData::Scalar((_, value))) => Ok(value.parse::<f64>().into_iter().collect()),
        other => Err(Ok(format!(
            "the need query answered {}, not a vector or a scalar{}",
            match other {
                Some(QueryData::Matrix(_)) => "a range vector",
                Some(QueryData::String(_)) => "a string",
                _ => "nothing",
            },
            answer.error.map(|e| format!(": {e}")).unwrap_or_default()
        ))),
    }
}

/// A `/api/v1/query` answer, as far as a need query reads it.
#[derive(Deserialize)]
struct QueryAnswer {
    #[serde(default)]
    data: Option<QueryData>,
    #[serde(default)]
    error: Option<String>,
}

/// Its `data`: a vector's samples, a scalar, or a kind a need query has no use for (skipped
/// unread).
#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum QueryData {
    Vector(Samples),
    Scalar((serde::de::IgnoredAny, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

/// One sample of a vector: its value only (its labels are skipped unread).
#[derive(Deserialize)]
struct Sample {
    value: (serde::de::IgnoredAny, String),
}

/// The text a too-long vector fails with (how [`samples_of`] tells it from a malformed answer).
const TOO_MANY: &str = "too many series";

/// A vector's sample values: at most [`NEED_ANSWER_SERIES`], else an error (the whole answer is
/// never held as a list).
struct Samples(Vec<f64>);

impl<'de> Deserialize<'de> for Samples {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Samples;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of samples")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Samples, A::Error> {
                let (mut values, mut series) = (Vec::new(), 0);
                while let Some(sample) = seq.next_element::<Sample>()? {
                    series += 1;
                    if series > NEED_ANSWER_SERIES {
                        return Err(serde::de::Error::custom(TOO_MANY));
                    }
                    // a value Prometheus writes as text: "NaN", "+Inf", "0.5"
                    values.extend(sample.value.1.parse::<f64>().ok());
                }
                Ok(Samples(values))
            }
        }
        deserializer.deserialize_seq(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/api/v1/query` answer of `n` samples, each of value `value`.
    fn vector(n: usize, value: &str) -> Vec<u8> {
        let sample =
            format!(r#"{{"metric":{{"namespace":"shop","pod":"web-0"}},"value":[1700000000.5,"{value}"]}}"#);
        let samples = vec![sample; n].join(",");
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{samples}]}}}}"#)
            .into_bytes()
    }

    #[test]
    fn a_need_answer_is_read_as_values_only() {
        assert_eq!(samples_of(&vector(3, "0.25")).unwrap(), vec![0.25; 3]);
        assert_eq!(samples_of(&vector(0, "1")).unwrap(), Vec::<f64>::new());
        let nan = samples_of(&vector(1, "NaN")).unwrap();
        assert!(
            nan.len() == 1 && nan[0].is_nan(),
            "NaN is a value need::by_query ignores"
        );
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.5"]}}"#;
        assert_eq!(samples_of(scalar).unwrap(), vec![0.5]);
        // the order of the fields does not matter
        let reordered = br#"{"data":{"result":[],"resultType":"vector"},"status":"success"}"#;
        assert_eq!(samples_of(reordered).unwrap(), Vec::<f64>::new());
    }

    #[test]
    fn a_need_answer_of_too_many_series_is_refused_with_why() {
        assert_eq!(
            samples_of(&vector(NEED_ANSWER_SERIES, "1")).unwrap().len(),
            NEED_ANSWER_SERIES
        );
        let too_many = samples_of(&vector(NEED_ANSWER_SERIES + 1, "1"))
            .unwrap_err()
            .unwrap();
        assert_eq!(
            too_many,
            "the need query answered more than 10000 series; narrow it (an aggregation such as max)"
        );
    }

    #[test]
    fn a_need_answer_of_another_kind_says_what_it_was() {
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"]]}]}}"#;
        assert_eq!(
            samples_of(matrix).unwrap_err().unwrap(),
            "the need query answered a range vector, not a vector or a scalar"
        );
        let error = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert_eq!(
            samples_of(error).unwrap_err().unwrap(),
            "the need query answered nothing, not a vector or a scalar: parse error"
        );
        assert!(
            samples_of(b"<html>").unwrap_err().is_err(),
            "not JSON: the caller's error"
        );
    }
}
