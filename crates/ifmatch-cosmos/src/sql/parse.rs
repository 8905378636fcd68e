//! A query's tokens into its tree, by recursive descent, no deeper than
//! [`MAX_DEPTH`](super::MAX_DEPTH).

use std::collections::HashMap;

use serde_json::Value as Json;

use super::lex::Token;
use super::{Expr, MAX_DEPTH, MAX_NODES, Op, Query, Select, SqlError};

/// The built-in functions served, with how many arguments each takes.
const FUNCTIONS: [(&str, usize, usize); 40] = [
    ("STARTSWITH", 2, 3),
    ("ENDSWITH", 2, 3),
    ("CONTAINS", 2, 3),
    ("LOWER", 1, 1),
    ("UPPER", 1, 1),
    ("LENGTH", 1, 1),
    ("CONCAT", 2, 64),
    ("SUBSTRING", 3, 3),
    ("LEFT", 2, 2),
    ("RIGHT", 2, 2),
    ("TRIM", 1, 1),
    ("LTRIM", 1, 1),
    ("RTRIM", 1, 1),
    ("INDEX_OF", 2, 3),
    ("REPLACE", 3, 3),
    ("REPLICATE", 2, 2),
    ("STRINGJOIN", 2, 2),
    ("REVERSE", 1, 1),
    ("TOSTRING", 1, 1),
    ("STRINGEQUALS", 2, 3),
    ("IS_DEFINED", 1, 1),
    ("IS_NULL", 1, 1),
    ("IS_NUMBER", 1, 1),
    ("IS_STRING", 1, 1),
    ("IS_BOOL", 1, 1),
    ("IS_ARRAY", 1, 1),
    ("IS_OBJECT", 1, 1),
    ("IS_PRIMITIVE", 1, 1),
    ("ARRAY_CONTAINS", 2, 3),
    ("ARRAY_LENGTH", 1, 1),
    ("ARRAY_SLICE", 2, 3),
    ("ARRAY_CONCAT", 2, 64),
    ("ABS", 1, 1),
    ("FLOOR", 1, 1),
    ("CEILING", 1, 1),
    ("ROUND", 1, 1),
    ("SQRT", 1, 1),
    ("POWER", 2, 2),
    ("SIGN", 1, 1),
    ("TRUNC", 1, 1),
];

const AGGREGATES: [&str; 5] = ["COUNT", "SUM", "MIN", "MAX", "AVG"];

/// Words that end an expression or a clause, and so never name a property alone.
const RESERVED: [&str; 22] = [
    "SELECT", "FROM", "WHERE", "ORDER", "BY", "ASC", "DESC", "TOP", "VALUE", "DISTINCT", "AND",
    "OR", "NOT", "IN", "BETWEEN", "LIKE", "AS", "OFFSET", "LIMIT", "JOIN", "GROUP", "ESCAPE",
];

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    depth: usize,
    parameters: &'a HashMap<String, Option<Json>>,
    /// The names used as the document, checked against the `FROM` alias once it is read.
    roots: Vec<String>,
    /// The operators and accesses read so far: each chained one nests the tree a level
    /// deeper (`a AND b AND c`, `c.a.b.c`), so their count bounds its depth.
    nodes: usize,
}

/// The query of `tokens`.
pub(crate) fn query(
    tokens: &[Token],
    parameters: &HashMap<String, Option<Json>>,
) -> Result<Query, SqlError> {
    let mut p = Parser {
        tokens,
        at: 0,
        depth: 0,
        parameters,
        roots: Vec::new(),
        nodes: 0,
    };
    p.keyword("SELECT")?;
    let distinct = p.eat_keyword("DISTINCT");
    let top = match p.eat_keyword("TOP") {
        true => Some(p.count("TOP")?),
        false => None,
    };
    let select = if p.eat_symbol("*") {
        Select::Star
    } else if p.eat_keyword("VALUE") {
        Select::Value(p.expr()?)
    } else {
        let mut items = Vec::new();
        loop {
            let expr = p.expr()?;
            let name = match p.eat_keyword("AS") {
                true => Some(p.name()?),
                false => match p.peek() {
                    Some(Token::Word(w)) if !is_reserved(w) => Some(p.name()?),
                    _ => None,
                },
            };
            let name = name.unwrap_or_else(|| match &expr {
                Expr::Member(_, last) => last.clone(),
                _ => format!("${}", items.len() + 1),
            });
            items.push((expr, name));
            if !p.eat_symbol(",") {
                break;
            }
        }
        Select::Items(items)
    };
    p.keyword("FROM")?;
    let container = p.name()?;
    if p.eat_keyword("IN") {
        return Err(SqlError::new(
            "FROM ... IN (iterating an array) is not served by this server.",
        ));
    }
    let alias = match p.eat_keyword("AS") {
        true => p.name()?,
        false => match p.peek() {
            Some(Token::Word(w)) if !is_reserved(w) => p.name()?,
            _ => container,
        },
    };
    if p.peek_keyword("JOIN") {
        return Err(SqlError::new("JOIN is not served by this server."));
    }
    let filter = match p.eat_keyword("WHERE") {
        true => Some(p.expr()?),
        false => None,
    };
    if p.peek_keyword("GROUP") {
        return Err(SqlError::new("GROUP BY is not served by this server."));
    }
    let mut order = Vec::new();
    if p.eat_keyword("ORDER") {
        p.keyword("BY")?;
        loop {
            let expr = p.expr()?;
            let descending = p.eat_keyword("DESC");
            if !descending {
                p.eat_keyword("ASC");
            }
            order.push((expr, descending));
            if !p.eat_symbol(",") {
                break;
            }
        }
    }
    let offset_limit = match p.eat_keyword("OFFSET") {
        true => {
            let offset = p.count("OFFSET")?;
            p.keyword("LIMIT")?;
            Some((offset, p.count("LIMIT")?))
        }
        false => None,
    };
    if let Some(token) = p.peek() {
        return Err(SqlError::new(format!(
            "Syntax error near {}.",
            describe(token)
        )));
    }
    if let Some(other) = p.roots.iter().find(|name| **name != alias) {
        return Err(SqlError::new(format!(
            "Identifier '{other}' could not be resolved: the query reads from '{alias}'."
        )));
    }
    let query = Query {
        distinct,
        top,
        select,
        filter,
        order,
        offset_limit,
    };
    check_aggregates(&query)?;
    Ok(query)
}

/// Aggregates only as the whole `VALUE`, or as every item of the selection; never in
/// `WHERE` or `ORDER BY`, never nested.
fn check_aggregates(query: &Query) -> Result<(), SqlError> {
    let misplaced = || {
        SqlError::new(
            "An aggregate is the whole selection here (SELECT VALUE COUNT(1) FROM c): GROUP BY and aggregates inside expressions are not served.",
        )
    };
    let top_level = |e: &Expr| match e {
        Expr::Aggregate(_, inner) => !contains_aggregate(inner),
        other => !contains_aggregate(other),
    };
    let selection_ok = match &query.select {
        Select::Star => true,
        Select::Value(e) => top_level(e),
        Select::Items(items) => {
            let all = items.iter().all(|(e, _)| matches!(e, Expr::Aggregate(..)));
            let none = items.iter().all(|(e, _)| !contains_aggregate(e));
            (all && items.iter().all(|(e, _)| top_level(e))) || none
        }
    };
    let elsewhere = query
        .filter
        .iter()
        .chain(query.order.iter().map(|(e, _)| e));
    if !selection_ok || elsewhere.into_iter().any(contains_aggregate) {
        return Err(misplaced());
    }
    if query.aggregates() && !query.order.is_empty() {
        return Err(SqlError::new(
            "ORDER BY with aggregates is not served by this server.",
        ));
    }
    Ok(())
}

fn contains_aggregate(expr: &Expr) -> bool {
    match expr {
        Expr::Aggregate(..) => true,
        Expr::Literal(_) | Expr::Undefined | Expr::Root => false,
        Expr::Member(e, _) | Expr::Negate(e) | Expr::Not(e) => contains_aggregate(e),
        Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Like(a, b, _) => {
            contains_aggregate(a) || contains_aggregate(b)
        }
        Expr::Between(a, b, c, _) | Expr::Ternary(a, b, c) => {
            contains_aggregate(a) || contains_aggregate(b) || contains_aggregate(c)
        }
        Expr::In(e, list, _) => contains_aggregate(e) || list.iter().any(contains_aggregate),
        Expr::Call(_, args) | Expr::Array(args) => args.iter().any(contains_aggregate),
        Expr::Object(fields) => fields.iter().any(|(_, e)| contains_aggregate(e)),
    }
}

fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

fn describe(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("'{w}'"),
        Token::Number(n) => format!("'{n}'"),
        Token::Text(t) => format!("'\"{t}\"'"),
        Token::Parameter(p) => format!("'{p}'"),
        Token::Symbol(s) => format!("'{s}'"),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<&Token> {
        let token = self.tokens.get(self.at);
        self.at += 1;
        token
    }

    fn peek_keyword(&self, keyword: &str) -> bool {
        matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(keyword))
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        let found = self.peek_keyword(keyword);
        if found {
            self.at += 1;
        }
        found
    }

    fn keyword(&mut self, keyword: &str) -> Result<(), SqlError> {
        match self.eat_keyword(keyword) {
            true => Ok(()),
            false => Err(self.expected(keyword)),
        }
    }

    fn eat_symbol(&mut self, symbol: &str) -> bool {
        let found = matches!(self.peek(), Some(Token::Symbol(s)) if *s == symbol);
        if found {
            self.at += 1;
        }
        found
    }

    fn symbol(&mut self, symbol: &str) -> Result<(), SqlError> {
        match self.eat_symbol(symbol) {
            true => Ok(()),
            false => Err(self.expected(&format!("'{symbol}'"))),
        }
    }

    fn expected(&self, what: &str) -> SqlError {
        match self.peek() {
            Some(token) => SqlError::new(format!(
                "Syntax error: {what} was expected near {}.",
                describe(token)
            )),
            None => SqlError::new(format!(
                "Syntax error: {what} was expected at the end of the query."
            )),
        }
    }

    fn name(&mut self) -> Result<String, SqlError> {
        match self.next() {
            Some(Token::Word(w)) if !is_reserved(w) => Ok(w.clone()),
            _ => {
                self.at -= 1;
                Err(self.expected("a name"))
            }
        }
    }

    /// A non-negative whole number, or a parameter holding one.
    fn count(&mut self, clause: &str) -> Result<u64, SqlError> {
        let value = match self.next().cloned() {
            Some(Token::Number(n)) => Some(n),
            Some(Token::Parameter(p)) => self
                .parameters
                .get(&p)
                .cloned()
                .flatten()
                .and_then(|v| v.as_f64()),
            _ => None,
        };
        match value {
            Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => Ok(n as u64),
            _ => Err(SqlError::new(format!(
                "{clause} takes a whole number that is not negative."
            ))),
        }
    }

    /// Counts one more operator or access, refusing the query past [`MAX_NODES`].
    fn node(&mut self) -> Result<(), SqlError> {
        self.nodes += 1;
        match self.nodes > MAX_NODES {
            true => Err(SqlError::new(format!(
                "The query has more than {MAX_NODES} operators and property accesses."
            ))),
            false => Ok(()),
        }
    }

    fn expr(&mut self) -> Result<Expr, SqlError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SqlError::new(
                "The query's expressions are nested too deeply (64 levels at most).",
            ));
        }
        let expr = self.ternary();
        self.depth -= 1;
        expr
    }

    fn ternary(&mut self) -> Result<Expr, SqlError> {
        let condition = self.coalesce()?;
        if !self.eat_symbol("?") {
            return Ok(condition);
        }
        let then = self.expr()?;
        self.symbol(":")?;
        let otherwise = self.expr()?;
        Ok(Expr::Ternary(
            Box::new(condition),
            Box::new(then),
            Box::new(otherwise),
        ))
    }

    fn coalesce(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.or()?;
        while self.eat_symbol("??") {
            self.node()?;
            left = Expr::Binary(Op::Coalesce, Box::new(left), Box::new(self.or()?));
        }
        Ok(left)
    }

    fn or(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.and()?;
        while self.eat_keyword("OR") {
            self.node()?;
            left = Expr::Binary(Op::Or, Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.not()?;
        while self.eat_keyword("AND") {
            self.node()?;
            left = Expr::Binary(Op::And, Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, SqlError> {
        if self.eat_keyword("NOT") {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(SqlError::new(
                    "The query's expressions are nested too deeply (64 levels at most).",
                ));
            }
            let inner = self.not();
            self.depth -= 1;
            return Ok(Expr::Not(Box::new(inner?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, SqlError> {
        let left = self.concat()?;
        let operators = [
            ("=", Op::Eq),
            ("!=", Op::Ne),
            ("<>", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        for (symbol, op) in operators {
            if self.eat_symbol(symbol) {
                let right = self.concat()?;
                return Ok(Expr::Binary(op, Box::new(left), Box::new(right)));
            }
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("IN") {
            self.symbol("(")?;
            let mut list = vec![self.expr()?];
            while self.eat_symbol(",") {
                list.push(self.expr()?);
            }
            self.symbol(")")?;
            if list.len() > 16_000 {
                return Err(SqlError::new("IN takes at most 16000 values."));
            }
            return Ok(Expr::In(Box::new(left), list, negated));
        }
        if self.eat_keyword("BETWEEN") {
            let low = self.concat()?;
            self.keyword("AND")?;
            let high = self.concat()?;
            return Ok(Expr::Between(
                Box::new(left),
                Box::new(low),
                Box::new(high),
                negated,
            ));
        }
        if self.eat_keyword("LIKE") {
            let pattern = self.concat()?;
            if let Expr::Literal(Json::String(text)) = &pattern
                && text.chars().count() > super::eval::MAX_LIKE
            {
                return Err(SqlError::new("A LIKE pattern is at most 1024 characters."));
            }
            if self.peek_keyword("ESCAPE") {
                return Err(SqlError::new(
                    "LIKE ... ESCAPE is not served by this server.",
                ));
            }
            return Ok(Expr::Like(Box::new(left), Box::new(pattern), negated));
        }
        if negated {
            return Err(self.expected("IN, BETWEEN or LIKE after NOT"));
        }
        Ok(left)
    }

    fn concat(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.additive()?;
        while self.eat_symbol("||") {
            self.node()?;
            left = Expr::Binary(Op::Concat, Box::new(left), Box::new(self.additive()?));
        }
        Ok(left)
    }

    fn additive(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.multiplicative()?;
        loop {
            let op = match () {
                _ if self.eat_symbol("+") => Op::Add,
                _ if self.eat_symbol("-") => Op::Sub,
                _ => return Ok(left),
            };
            self.node()?;
            left = Expr::Binary(op, Box::new(left), Box::new(self.multiplicative()?));
        }
    }

    fn multiplicative(&mut self) -> Result<Expr, SqlError> {
        let mut left = self.unary()?;
        loop {
            let op = match () {
                _ if self.eat_symbol("*") => Op::Mul,
                _ if self.eat_symbol("/") => Op::Div,
                _ if self.eat_symbol("%") => Op::Mod,
                _ => return Ok(left),
            };
            self.node()?;
            left = Expr::Binary(op, Box::new(left), Box::new(self.unary()?));
        }
    }

    fn unary(&mut self) -> Result<Expr, SqlError> {
        if self.eat_symbol("-") {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(SqlError::new(
                    "The query's expressions are nested too deeply (64 levels at most).",
                ));
            }
            let inner = self.unary();
            self.depth -= 1;
            return Ok(Expr::Negate(Box::new(inner?)));
        }
        if self.eat_symbol("+") {
            return self.unary();
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Expr, SqlError> {
        let mut expr = self.primary()?;
        loop {
            if self.eat_symbol(".") {
                let name = match self.next() {
                    Some(Token::Word(w)) => w.clone(),
                    _ => {
                        self.at -= 1;
                        return Err(self.expected("a property name after '.'"));
                    }
                };
                self.node()?;
                expr = Expr::Member(Box::new(expr), name);
            } else if self.eat_symbol("[") {
                self.node()?;
                let index = self.expr()?;
                self.symbol("]")?;
                expr = match index {
                    Expr::Literal(Json::String(name)) => Expr::Member(Box::new(expr), name),
                    other => Expr::Index(Box::new(expr), Box::new(other)),
                };
            } else {
                return Ok(expr);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, SqlError> {
        let Some(token) = self.next().cloned() else {
            return Err(SqlError::new(
                "Syntax error: the query ends where a value was expected.",
            ));
        };
        match token {
            Token::Number(n) => Ok(Expr::Literal(number(n))),
            Token::Text(t) => Ok(Expr::Literal(Json::String(t))),
            Token::Parameter(p) => match self.parameters.get(&p) {
                Some(Some(value)) => Ok(Expr::Literal(value.clone())),
                Some(None) => Ok(Expr::Undefined),
                None => Err(SqlError::new(format!(
                    "The parameter {p} has no value in the request's parameters."
                ))),
            },
            Token::Symbol("(") => {
                let inner = self.expr()?;
                self.symbol(")")?;
                Ok(inner)
            }
            Token::Symbol("[") => {
                let mut items = Vec::new();
                if !self.eat_symbol("]") {
                    loop {
                        items.push(self.expr()?);
                        if !self.eat_symbol(",") {
                            break;
                        }
                    }
                    self.symbol("]")?;
                }
                Ok(Expr::Array(items))
            }
            Token::Symbol("{") => {
                let mut fields = Vec::new();
                if !self.eat_symbol("}") {
                    loop {
                        let name = match self.next().cloned() {
                            Some(Token::Word(w)) => w,
                            Some(Token::Text(t)) => t,
                            _ => {
                                return Err(SqlError::new(
                                    "An object's property names are names or strings.",
                                ));
                            }
                        };
                        self.symbol(":")?;
                        fields.push((name, self.expr()?));
                        if !self.eat_symbol(",") {
                            break;
                        }
                    }
                    self.symbol("}")?;
                }
                Ok(Expr::Object(fields))
            }
            Token::Word(word) => self.word(word),
            Token::Symbol(s) => Err(SqlError::new(format!("Syntax error near '{s}'."))),
        }
    }

    /// A word where a value is expected: a constant, a function, or the document's alias.
    fn word(&mut self, word: String) -> Result<Expr, SqlError> {
        let upper = word.to_ascii_uppercase();
        match upper.as_str() {
            "TRUE" => return Ok(Expr::Literal(Json::Bool(true))),
            "FALSE" => return Ok(Expr::Literal(Json::Bool(false))),
            "NULL" => return Ok(Expr::Literal(Json::Null)),
            "UNDEFINED" => return Ok(Expr::Undefined),
            _ => {}
        }
        if self.eat_symbol("(") {
            let mut args = Vec::new();
            if !self.eat_symbol(")") {
                loop {
                    args.push(self.expr()?);
                    if !self.eat_symbol(",") {
                        break;
                    }
                }
                self.symbol(")")?;
            }
            if let Some(name) = AGGREGATES.iter().find(|a| **a == upper) {
                let [arg] = <[Expr; 1]>::try_from(args)
                    .map_err(|_| SqlError::new(format!("{name} takes one argument.")))?;
                return Ok(Expr::Aggregate(name, Box::new(arg)));
            }
            let Some((name, min, max)) = FUNCTIONS.iter().find(|(f, ..)| *f == upper) else {
                return Err(SqlError::new(format!(
                    "The function {word} is not served by this server."
                )));
            };
            if args.len() < *min || args.len() > *max {
                return Err(SqlError::new(format!(
                    "{name} takes {min} to {max} arguments."
                )));
            }
            return Ok(Expr::Call(name, args));
        }
        if is_reserved(&word) {
            return Err(SqlError::new(format!("Syntax error near '{word}'.")));
        }
        self.roots.push(word);
        Ok(Expr::Root)
    }
}

/// A number as JSON: whole numbers as integers, as Cosmos writes them.
fn number(n: f64) -> Json {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Json::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Json::Null, Json::Number)
    }
}
