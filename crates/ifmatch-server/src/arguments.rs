//! How the command line's values are read into the options that declare themselves as its
//! arguments (`clap::Args`): [`crate::Options`], [`crate::proxy::ProxyOptions`],
//! [`crate::Limits`], [`crate::ObserveOptions`].

use std::time::Duration;

/// A positive number of seconds (`30`, `0.5`).
pub fn seconds(text: &str) -> Result<Duration, String> {
    match seconds_or_zero(text)? {
        zero if zero.is_zero() => Err(format!("{text} is not a positive number of seconds")),
        positive => Ok(positive),
    }
}

/// Zero or more seconds.
pub fn seconds_or_zero(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("{text} is not a number of seconds"))
}

/// A hop believed: a network (`10.0.0.0/8`), or one address.
pub fn hop(text: &str) -> Result<ipnet::IpNet, String> {
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{text} is neither an address nor a CIDR network (10.0.0.0/8)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_read_and_what_is_not_one_is_refused() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(seconds_or_zero("0"), Ok(Duration::ZERO));
        for bad in ["0", "-1", "NaN", "inf", "x", ""] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(hop("10.0.0.1").unwrap().to_string(), "10.0.0.1/32");
        assert!(hop("10.0.0.0/33").is_err());
    }

    /// What `T`'s command line gives for `args` and nothing else.
    fn parsed<T: clap::Args + clap::FromArgMatches>(args: &[&str]) -> T {
        let command = T::augment_args(clap::Command::new("ifmatch"));
        T::from_arg_matches(
            &command.get_matches_from(std::iter::once("ifmatch").chain(args.iter().copied())),
        )
        .unwrap()
    }

    /// [`crate::Options`] (with [`crate::Limits`]) and [`crate::proxy::ProxyOptions`] say
    /// their defaults twice, to the command line and in `Default` or `new`: the two must
    /// agree.
    #[test]
    fn the_command_lines_defaults_are_the_libraries() {
        let serve: crate::Options = parsed(&[]);
        assert_eq!(
            format!("{serve:?}"),
            format!("{:?}", crate::Options::default())
        );
        let proxy: crate::proxy::ProxyOptions = parsed(&["--upstream", "http://origin:1"]);
        let new = crate::proxy::ProxyOptions::new("http://origin:1".parse().unwrap());
        assert_eq!(format!("{proxy:?}"), format!("{new:?}"));
    }
}
