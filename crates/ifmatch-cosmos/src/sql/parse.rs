//! A query's tokens into its tree, by recursive descent, no deeper than
//! [`MAX_DEPTH`].

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value as Json;

use super::catalog::Function;
use super::error::SqlError;
use super::lex::Token;
use super::tree::visit;
use super::tree::{Expr, Op, Query, Select, Source};

/// The most `JOIN`s one `SELECT` holds (Azure's service quotas: 10 a query).
pub const MAX_JOINS: usize = 10;
/// The deepest expression taken, in nested parentheses, calls and unary operators.
pub const MAX_DEPTH: usize = 64;
/// The most operators and property accesses a query holds besides its `AND`s and `OR`s: what
/// bounds how deep a chain such as `a + b + c` or `c.a.b.c` nests the tree that every
/// evaluation walks recursively. Room for Azure's 500 `AND`s of comparisons of a path each.
pub const MAX_NODES: usize = 2000;
/// The most `AND`s, and the most `OR`s, a query holds (Azure's account says 500 of each:
/// `maxLogicalAndPerSqlQuery`, `maxLogicalOrPerSqlQuery`).
pub const MAX_LOGICAL: usize = 500;

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
    parameters: &'a HashMap<String, Option<Arc<Json>>>,
    /// The operators and accesses read so far: each chained one nests the tree a level
    /// deeper (`a + b + c`, `c.a.b.c`), so their count bounds its depth.
    nodes: usize,
    /// The `AND`s and the `OR`s read so far, each bounded apart (and nesting as deep).
    ands: usize,
    ors: usize,
    /// The aggregates of the query being read (a subquery has its own).
    aggregates: Vec<(&'static str, Expr)>,
    /// Whether aggregates may be read here: in a selection, outside another aggregate.
    aggregates_allowed: bool,
}

/// The query of `tokens`, its names bound.
pub(crate) fn query(
    tokens: &[Token],
    parameters: &HashMap<String, Option<Arc<Json>>>,
) -> Result<Query, SqlError> {
    let mut p = Parser {
        tokens,
        at: 0,
        depth: 0,
        parameters,
        nodes: 0,
        ands: 0,
        ors: 0,
        aggregates: Vec::new(),
        aggregates_allowed: false,
    };
    let mut query = p.select_query()?;
    if let Some(token) = p.peek() {
        return Err(SqlError::new(format!(
            "Syntax error near {}.",
            describe(token)
        )));
    }
    bind_query(&mut query, &mut Vec::new(), true)?;
    Ok(query)
}

/// The words queries bind rows to, by slot.
type Names = Vec<String>;

/// Binds the names of `query` to slots: `chain` holds the enclosing queries' names. In a top
/// query's `FROM` source, a name is the container's item.
fn bind_query(query: &mut Query, chain: &mut Names, top: bool) -> Result<(), SqlError> {
    query.outer = chain.len();
    for (at, source) in query.from.iter_mut().enumerate() {
        let (Source::Bind(expr) | Source::Iterate(expr)) = source;
        match top && at == 0 {
            true => rooted(expr),
            false => bind(expr, chain)?,
        }
        chain.push(query.names[at].clone());
    }
    let bound = (|| {
        match &mut query.select {
            Select::Star => {}
            Select::Value(expr) => bind(expr, chain)?,
            Select::Items(items) => {
                for (expr, _) in items {
                    bind(expr, chain)?;
                }
            }
        }
        let filter = query.filter.iter_mut();
        let group = query.group.iter_mut();
        let order = query.order.iter_mut().map(|(e, _)| e);
        let aggregates = query.aggregates.iter_mut().map(|(_, e)| e);
        for expr in filter.chain(group).chain(order).chain(aggregates) {
            bind(expr, chain)?;
        }
        Ok(())
    })();
    chain.truncate(query.outer);
    bound
}

/// Every name in the `FROM` source of a top query stands for the container's item.
fn rooted(expr: &mut Expr) {
    visit(expr, &mut |e| {
        if matches!(e, Expr::Name(_)) {
            *e = Expr::Root;
        }
        Ok(())
    })
    .expect("rooting refuses nothing");
}

/// Binds each name in `expr` to the innermost slot of that name in `chain`.
fn bind(expr: &mut Expr, chain: &mut Names) -> Result<(), SqlError> {
    visit(expr, &mut |e| match e {
        Expr::Name(name) => match chain.iter().rposition(|n| n == name) {
            Some(slot) => {
                *e = Expr::Var(slot);
                Ok(())
            }
            None => Err(SqlError::new(format!(
                "Identifier '{name}' could not be resolved: the query's sources are {}.",
                match chain.is_empty() {
                    true => "none".to_owned(),
                    false => chain.join(", "),
                }
            ))),
        },
        Expr::Exists(sub) | Expr::ArrayOf(sub) | Expr::Scalar(sub) => bind_query(sub, chain, false),
        _ => Ok(()),
    })
}

fn is_reserved(word: &str) -> bool {
    RESERVED.iter().any(|r| r.eq_ignore_ascii_case(word))
}

fn describe(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("'{w}'"),
        Token::Integer(n) => format!("'{n}'"),
        Token::Number(n) => format!("'{n}'"),
        Token::Text(t) => format!("'\"{t}\"'"),
        Token::Parameter(p) => format!("'{p}'"),
        Token::Symbol(s) => format!("'{s}'"),
    }
}

impl Parser<'_> {
    /// `SELECT ... [FROM ... [JOIN ...]*] [WHERE ...] [GROUP BY ...] [ORDER BY ...]
    /// [OFFSET ... LIMIT ...]`, its names not bound yet.
    fn select_query(&mut self) -> Result<Query, SqlError> {
        let aggregates = std::mem::take(&mut self.aggregates);
        let query = self.clauses();
        let own = std::mem::replace(&mut self.aggregates, aggregates);
        let mut query = query?;
        query.aggregates = own;
        Ok(query)
    }

    fn clauses(&mut self) -> Result<Query, SqlError> {
        self.keyword("SELECT")?;
        let distinct = self.eat_keyword("DISTINCT");
        let top = match self.eat_keyword("TOP") {
            true => Some(self.count("TOP")?),
            false => None,
        };
        let allowed = std::mem::replace(&mut self.aggregates_allowed, true);
        let select = self.selection();
        self.aggregates_allowed = allowed;
        let select = select?;
        let (mut from, mut names) = (Vec::new(), Vec::new());
        if self.eat_keyword("FROM") {
            loop {
                let (source, name) = self.source()?;
                from.push(source);
                names.push(name);
                if !self.eat_keyword("JOIN") {
                    break;
                }
                if from.len() > MAX_JOINS {
                    return Err(SqlError::new(format!(
                        "A query joins at most {} sources.",
                        MAX_JOINS
                    )));
                }
            }
        }
        if matches!(select, Select::Star) && from.len() != 1 {
            return Err(SqlError::new(
                "SELECT * takes one source: name what to select from each (SELECT VALUE ..., or SELECT c.a, t ...).",
            ));
        }
        let filter = match self.eat_keyword("WHERE") {
            true => Some(self.expr()?),
            false => None,
        };
        let mut group = Vec::new();
        if self.eat_keyword("GROUP") {
            self.keyword("BY")?;
            group = self.separated(Self::expr)?;
        }
        let mut order = Vec::new();
        let mut rank = false;
        if self.eat_keyword("ORDER") {
            self.keyword("BY")?;
            // `ORDER BY RANK <score>`: the rows by a scoring function, the most relevant first
            // (`RANK` followed by a function, not a name alone); the only order then.
            if self.peek_keyword("RANK")
                && matches!(self.tokens.get(self.at + 1), Some(Token::Word(_)))
            {
                self.at += 1;
                let score = self.expr()?;
                if !matches!(
                    score,
                    Expr::Call(
                        Function::FULLTEXTSCORE | Function::RRF | Function::VECTORDISTANCE,
                        _
                    )
                ) {
                    return Err(SqlError::new(
                        "ORDER BY RANK takes a scoring function: FullTextScore, VectorDistance or RRF.",
                    ));
                }
                rank = true;
                order.push((score, true));
            } else {
                loop {
                    let expr = self.expr()?;
                    let descending = self.eat_keyword("DESC");
                    if !descending {
                        self.eat_keyword("ASC");
                    }
                    order.push((expr, descending));
                    if !self.eat_symbol(",") {
                        break;
                    }
                }
            }
        }
        let offset_limit = match self.eat_keyword("OFFSET") {
            true => {
                let offset = self.count("OFFSET")?;
                self.keyword("LIMIT")?;
                Some((offset, self.count("LIMIT")?))
            }
            false => None,
        };
        Ok(Query {
            distinct,
            top,
            select,
            from,
            filter,
            group,
            order,
            rank,
            offset_limit,
            aggregates: Vec::new(),
            names,
            outer: 0,
        })
    }

    /// `*`, `VALUE expr`, or `expr [AS name], ...`.
    fn selection(&mut self) -> Result<Select, SqlError> {
        if self.eat_symbol("*") {
            return Ok(Select::Star);
        }
        if self.eat_keyword("VALUE") {
            return Ok(Select::Value(self.expr()?));
        }
        let mut items = Vec::new();
        loop {
            let expr = self.expr()?;
            let name = self.alias()?;
            let name = name.unwrap_or_else(|| match &expr {
                Expr::Member(_, last) | Expr::Name(last) => last.clone(),
                _ => format!("${}", items.len() + 1),
            });
            items.push((expr, name));
            if !self.eat_symbol(",") {
                break;
            }
        }
        Ok(Select::Items(items))
    }

    /// `AS name`, or a name alone that is no keyword: what an item or a source is called.
    fn alias(&mut self) -> Result<Option<String>, SqlError> {
        match self.eat_keyword("AS") {
            true => Ok(Some(self.name()?)),
            false => match self.peek() {
                Some(Token::Word(w)) if !is_reserved(w) => Ok(Some(self.name()?)),
                _ => Ok(None),
            },
        }
    }

    /// A source of rows and the name it binds: `name IN expr` (each item), or `expr [AS]
    /// [name]` (the value; a subquery's each result).
    fn source(&mut self) -> Result<(Source, String), SqlError> {
        let iterates = matches!(self.peek(), Some(Token::Word(w)) if !is_reserved(w))
            && matches!(self.tokens.get(self.at + 1), Some(Token::Word(w)) if w.eq_ignore_ascii_case("IN"));
        if iterates {
            let name = self.name()?;
            self.keyword("IN")?;
            // A subquery with no `FROM` is its one value: `IN` iterates that value's elements,
            // as Azure answers `JOIN n IN (SELECT VALUE ARRAY(...))` and `IN (SELECT VALUE [...])`.
            let expr = match self.source_expr()? {
                Expr::ArrayOf(query) if query.from.is_empty() => Expr::Scalar(query),
                expr => expr,
            };
            return Ok((Source::Iterate(expr), name));
        }
        let expr = self.source_expr()?;
        let name = self.alias()?;
        let name = match (name, &expr) {
            (Some(name), _) => name,
            (None, Expr::Member(_, last) | Expr::Name(last)) => last.clone(),
            (None, _) => {
                return Err(SqlError::new(
                    "A source that is not a name or a path needs one: (SELECT ...) AS x.",
                ));
            }
        };
        match expr {
            Expr::ArrayOf(query) => Ok((Source::Iterate(Expr::ArrayOf(query)), name)),
            expr => Ok((Source::Bind(expr), name)),
        }
    }

    /// What a source reads: a path (`c`, `c.children[0]`), or a subquery, whose results it
    /// takes.
    fn source_expr(&mut self) -> Result<Expr, SqlError> {
        if self.starts_subquery() {
            self.symbol("(")?;
            let query = self.select_query()?;
            self.symbol(")")?;
            return Ok(Expr::ArrayOf(Box::new(query)));
        }
        self.postfix()
    }

    /// Whether a `(` that starts a subquery is next.
    fn starts_subquery(&self) -> bool {
        matches!(self.peek(), Some(Token::Symbol("(")))
            && matches!(self.tokens.get(self.at + 1), Some(Token::Word(w)) if w.eq_ignore_ascii_case("SELECT"))
    }

    /// A subquery in parentheses, at most [`MAX_DEPTH`] deep: its aggregates are its own.
    fn subquery(&mut self) -> Result<Query, SqlError> {
        self.deeper(|p| {
            p.symbol("(")?;
            let allowed = std::mem::replace(&mut p.aggregates_allowed, false);
            let query = p.select_query();
            p.aggregates_allowed = allowed;
            let query = query?;
            p.symbol(")")?;
            Ok(query)
        })
    }

    /// What `inner` reads, one level deeper: past [`MAX_DEPTH`] levels the query is refused
    /// (each level is a frame of the recursive descent, and of evaluation).
    fn deeper<T>(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<T, SqlError>,
    ) -> Result<T, SqlError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(SqlError::new(
                "The query's expressions are nested too deeply (64 levels at most).",
            ));
        }
        let read = inner(self);
        self.depth -= 1;
        read
    }

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
        self.at += usize::from(found);
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
        self.at += usize::from(found);
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
            Some(Token::Integer(n)) => Some(n as f64),
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

    /// Counts one more `AND` or `OR`, refusing the query past Azure's 500 of each
    /// (`maxLogicalAndPerSqlQuery`, `maxLogicalOrPerSqlQuery`).
    fn logical(&mut self, op: Op) -> Result<(), SqlError> {
        let (count, name) = match op {
            Op::And => (&mut self.ands, "AND"),
            _ => (&mut self.ors, "OR"),
        };
        *count += 1;
        match *count > MAX_LOGICAL {
            true => Err(SqlError::new(format!(
                "The query has more than {MAX_LOGICAL} logical {name} operators."
            ))),
            false => Ok(()),
        }
    }

    fn expr(&mut self) -> Result<Expr, SqlError> {
        self.deeper(Self::ternary)
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
        self.chain(Op::Coalesce, Self::or)
    }

    fn or(&mut self) -> Result<Expr, SqlError> {
        self.chain(Op::Or, Self::and)
    }

    fn and(&mut self) -> Result<Expr, SqlError> {
        self.chain(Op::And, Self::not)
    }

    /// `next (op next)*`, grouped from the left: `??`, `OR` and `AND` (the logical ones
    /// counted against their limit).
    fn chain(
        &mut self,
        op: Op,
        next: fn(&mut Self) -> Result<Expr, SqlError>,
    ) -> Result<Expr, SqlError> {
        let mut left = next(self)?;
        loop {
            match op {
                Op::Coalesce if self.eat_symbol("??") => self.node()?,
                Op::Or if self.eat_keyword("OR") => self.logical(op)?,
                Op::And if self.eat_keyword("AND") => self.logical(op)?,
                _ => return Ok(left),
            }
            left = Expr::Binary(op, Box::new(left), Box::new(next(self)?));
        }
    }

    fn not(&mut self) -> Result<Expr, SqlError> {
        if self.eat_keyword("NOT") {
            return Ok(Expr::Not(Box::new(self.deeper(Self::not)?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, SqlError> {
        let left = self.symbols(0)?;
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
                let right = self.symbols(0)?;
                return Ok(Expr::Binary(op, Box::new(left), Box::new(right)));
            }
        }
        let negated = self.eat_keyword("NOT");
        if self.eat_keyword("IN") {
            self.symbol("(")?;
            let list = self.separated(Self::expr)?;
            self.symbol(")")?;
            if list.len() > 16_000 {
                return Err(SqlError::new("IN takes at most 16000 values."));
            }
            return Ok(Expr::In(Box::new(left), list, negated));
        }
        if self.eat_keyword("BETWEEN") {
            let low = self.symbols(0)?;
            self.keyword("AND")?;
            let high = self.symbols(0)?;
            return Ok(Expr::Between(
                Box::new(left),
                Box::new(low),
                Box::new(high),
                negated,
            ));
        }
        if self.eat_keyword("LIKE") {
            let pattern = self.symbols(0)?;
            if let Expr::Literal(literal) = &pattern
                && let Json::String(text) = &**literal
                && text.chars().count() > super::like::MAX_LIKE
            {
                return Err(SqlError::new("A LIKE pattern is at most 1024 characters."));
            }
            let escape = match self.eat_keyword("ESCAPE") {
                true => match self.next() {
                    Some(Token::Text(t)) if t.chars().count() == 1 => t.chars().next(),
                    _ => return Err(SqlError::new("ESCAPE takes one character: ESCAPE '!'.")),
                },
                false => None,
            };
            return Ok(Expr::Like(
                Box::new(left),
                Box::new(pattern),
                escape,
                negated,
            ));
        }
        if negated {
            return Err(self.expected("IN, BETWEEN or LIKE after NOT"));
        }
        Ok(left)
    }

    /// The operators written as symbols, loosest first, each level grouped from the left:
    /// `||`, `|`, `^`, `&`, the shifts, `+` and `-`, then `*`, `/` and `%`.
    fn symbols(&mut self, level: usize) -> Result<Expr, SqlError> {
        const LEVELS: [&[(&str, Op)]; 7] = [
            &[("||", Op::Concat)],
            &[("|", Op::BitOr)],
            &[("^", Op::BitXor)],
            &[("&", Op::BitAnd)],
            &[(">>>", Op::Ushr), ("<<", Op::Shl), (">>", Op::Shr)],
            &[("+", Op::Add), ("-", Op::Sub)],
            &[("*", Op::Mul), ("/", Op::Div), ("%", Op::Mod)],
        ];
        let Some(operators) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.symbols(level + 1)?;
        loop {
            let eaten = operators.iter().find(|(symbol, _)| self.eat_symbol(symbol));
            let Some(&(_, op)) = eaten else {
                return Ok(left);
            };
            self.node()?;
            let right = self.symbols(level + 1)?;
            left = Expr::Binary(op, Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self) -> Result<Expr, SqlError> {
        if self.eat_symbol("-") {
            // A negative number written out is a literal, exact: -9223372036854775808 too.
            match self.peek() {
                Some(Token::Integer(n)) => {
                    let n = *n;
                    self.at += 1;
                    return Ok(Expr::literal(Json::from(-n)));
                }
                Some(Token::Number(n)) if *n == 9_223_372_036_854_775_808.0 => {
                    self.at += 1;
                    return Ok(Expr::literal(Json::from(i64::MIN)));
                }
                _ => {}
            }
            return Ok(Expr::Negate(Box::new(self.deeper(Self::unary)?)));
        }
        if self.eat_symbol("~") {
            return Ok(Expr::BitNot(Box::new(self.deeper(Self::unary)?)));
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
                    Expr::Literal(literal) if literal.is_string() => {
                        let name = literal.as_str().unwrap_or_default().to_owned();
                        Expr::Member(Box::new(expr), name)
                    }
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
            Token::Integer(n) => Ok(Expr::literal(Json::from(n))),
            Token::Number(n) => Ok(Expr::literal(number(n))),
            Token::Text(t) => Ok(Expr::literal(Json::String(t))),
            Token::Parameter(p) => match self.parameters.get(&p) {
                Some(Some(value)) => Ok(Expr::Literal(value.clone())),
                Some(None) => Ok(Expr::Undefined),
                None => Err(SqlError::new(format!(
                    "The parameter {p} has no value in the request's parameters."
                ))),
            },
            Token::Symbol("(") if self.peek_keyword("SELECT") => {
                self.at -= 1;
                Ok(Expr::Scalar(Box::new(self.subquery()?)))
            }
            Token::Symbol("(") => {
                let inner = self.expr()?;
                self.symbol(")")?;
                Ok(inner)
            }
            Token::Symbol("[") => Ok(Expr::Array(self.enclosed("]", Self::expr)?)),
            Token::Symbol("{") => Ok(Expr::Object(self.enclosed("}", Self::field)?)),
            Token::Word(word) => self.word(word),
            Token::Symbol(s) => Err(SqlError::new(format!("Syntax error near '{s}'."))),
        }
    }

    /// A call's arguments, after its `(`, to its `)`.
    fn arguments(&mut self) -> Result<Vec<Expr>, SqlError> {
        self.enclosed(")", Self::expr)
    }

    /// What `item` reads, none or more separated by commas, to `close`.
    fn enclosed<T>(
        &mut self,
        close: &str,
        item: fn(&mut Self) -> Result<T, SqlError>,
    ) -> Result<Vec<T>, SqlError> {
        if self.eat_symbol(close) {
            return Ok(Vec::new());
        }
        let items = self.separated(item)?;
        self.symbol(close)?;
        Ok(items)
    }

    /// What `item` reads, once or more, separated by commas.
    fn separated<T>(
        &mut self,
        item: fn(&mut Self) -> Result<T, SqlError>,
    ) -> Result<Vec<T>, SqlError> {
        let mut items = vec![item(self)?];
        while self.eat_symbol(",") {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// An object literal's property: its name (a name or a string), `:`, its value.
    fn field(&mut self) -> Result<(String, Expr), SqlError> {
        let name = match self.next().cloned() {
            Some(Token::Word(w)) => w,
            Some(Token::Text(t)) => t,
            _ => {
                let says = "An object's property names are names or strings.";
                return Err(SqlError::new(says));
            }
        };
        self.symbol(":")?;
        Ok((name, self.expr()?))
    }

    /// A word where a value is expected: a constant, a function (built in, or `udf.name`),
    /// or the document's alias.
    fn word(&mut self, word: String) -> Result<Expr, SqlError> {
        let upper = word.to_ascii_uppercase();
        let ahead = (self.tokens.get(self.at), self.tokens.get(self.at + 1));
        let ahead = (ahead.0, ahead.1, self.tokens.get(self.at + 2));
        if let (Some(Token::Symbol(".")), Some(Token::Word(name)), Some(Token::Symbol("("))) = ahead
            && upper == "UDF"
        {
            let name = name.clone();
            self.at += 3;
            return Ok(Expr::Udf(name, self.arguments()?));
        }
        match upper.as_str() {
            "TRUE" => return Ok(Expr::literal(Json::Bool(true))),
            "FALSE" => return Ok(Expr::literal(Json::Bool(false))),
            "NULL" => return Ok(Expr::literal(Json::Null)),
            // No JSON holds them: whatever takes them is undefined.
            "UNDEFINED" => return Ok(Expr::Undefined),
            "NAN" => return Ok(Expr::NonFinite(f64::NAN)),
            "INFINITY" => return Ok(Expr::NonFinite(f64::INFINITY)),
            _ => {}
        }
        if (upper == "EXISTS" || upper == "ARRAY") && self.starts_subquery() {
            let query = Box::new(self.subquery()?);
            return Ok(match upper.as_str() {
                "EXISTS" => Expr::Exists(query),
                _ => Expr::ArrayOf(query),
            });
        }
        let aggregate = AGGREGATES.iter().find(|a| **a == upper);
        if let Some(name) = aggregate
            && self.peek() == Some(&Token::Symbol("("))
        {
            if !self.aggregates_allowed {
                return Err(SqlError::new(format!(
                    "{name} is an aggregate: it goes in a selection, not in WHERE, GROUP BY, ORDER BY or another aggregate."
                )));
            }
            self.symbol("(")?;
            self.aggregates_allowed = false;
            let argument = self.expr();
            self.aggregates_allowed = true;
            let argument = argument?;
            self.symbol(")")?;
            self.aggregates.push((name, argument));
            return Ok(Expr::Aggregate(self.aggregates.len() - 1));
        }
        if self.eat_symbol("(") {
            let args = self.arguments()?;
            let Some((function, min, max)) = Function::named(&upper) else {
                return Err(SqlError::new(format!(
                    "The function {word} is not served by this server."
                )));
            };
            if args.len() < min || args.len() > max {
                return Err(SqlError::new(format!(
                    "{} takes {min} to {max} arguments.",
                    function.name()
                )));
            }
            return Ok(Expr::Call(function, args));
        }
        if is_reserved(&word) {
            return Err(SqlError::new(format!("Syntax error near '{word}'.")));
        }
        Ok(Expr::Name(word))
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
