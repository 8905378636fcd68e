// The server-side API a stored procedure, trigger or user-defined function sees: getContext()
// with its collection, request and response, as Azure's JavaScript server SDK reference
// describes them, and console.log. Collection operations are queued here and performed by the
// host (script/mod.rs), which then calls their callbacks through `__ifmatch.deliver`: as on
// Azure, a callback runs after the function that asked returned.
var __ifmatch = (function () {
  "use strict";
  var queued = [];
  var callbacks = {};
  var next = 0;
  var accepting = true;
  var limit = 0;
  var taken = 0;
  var log = [];
  var self = "";
  var response = { body: undefined };
  var request = { body: undefined, operation: "", headers: {} };

  function fail(message) {
    throw new Error(message);
  }
  // Arguments after the required ones: (options, callback), (callback), or none.
  function tail(args, from) {
    var options = args[from];
    var callback = args[from + 1];
    if (typeof options === "function") {
      callback = options;
      options = undefined;
    }
    if (options !== undefined && options !== null && typeof options !== "object") {
      fail("The options of a collection operation are an object.");
    }
    if (callback !== undefined && callback !== null && typeof callback !== "function") {
      fail("The callback of a collection operation is a function.");
    }
    return { options: options || {}, callback: callback || null };
  }
  function link(value, what) {
    if (typeof value !== "string" || value.length === 0) {
      fail("The " + what + " link is a non-empty string.");
    }
    return value;
  }
  function queue(kind, args, rest) {
    if (!accepting) {
      return false;
    }
    if (taken >= limit) {
      accepting = false;
      return false;
    }
    taken += 1;
    var id = next++;
    callbacks[id] = rest.callback;
    args.options = rest.options;
    queued.push({ id: id, kind: kind, args: args });
    return true;
  }

  var collection = {
    getSelfLink: function () { return self; },
    getAltLink: function () { return self; },
    createDocument: function (collectionLink, body) {
      return queue("create", { link: link(collectionLink, "collection"), body: body }, tail(arguments, 2));
    },
    upsertDocument: function (collectionLink, body) {
      return queue("upsert", { link: link(collectionLink, "collection"), body: body }, tail(arguments, 2));
    },
    replaceDocument: function (documentLink, body) {
      return queue("replace", { link: link(documentLink, "document"), body: body }, tail(arguments, 2));
    },
    readDocument: function (documentLink) {
      return queue("read", { link: link(documentLink, "document") }, tail(arguments, 1));
    },
    deleteDocument: function (documentLink) {
      return queue("delete", { link: link(documentLink, "document") }, tail(arguments, 1));
    },
    readDocuments: function (collectionLink) {
      return queue("query", { link: link(collectionLink, "collection"), query: "SELECT * FROM root r" }, tail(arguments, 1));
    },
    queryDocuments: function (collectionLink, query) {
      if (typeof query !== "string" && (query === null || typeof query !== "object")) {
        fail("A query is a string, or an object with query and parameters.");
      }
      return queue("query", { link: link(collectionLink, "collection"), query: query }, tail(arguments, 2));
    }
  };
  var context = {
    getCollection: function () { return collection; },
    getRequest: function () {
      return {
        getBody: function () { return request.body; },
        setBody: function (body) { request.body = body; },
        getValue: function () { return request.body; },
        setValue: function (body) { request.body = body; },
        getOperationType: function () { return request.operation; },
        getRequestHeader: function (name) { return request.headers[String(name).toLowerCase()]; }
      };
    },
    getResponse: function () {
      return {
        getBody: function () { return response.body; },
        setBody: function (body) { response.body = body; },
        getValue: function () { return response.body; },
        setValue: function (body) { response.body = body; },
        appendBody: function (text) { response.body = (response.body === undefined ? "" : String(response.body)) + String(text); },
        appendValue: function (text) { response.body = (response.body === undefined ? "" : String(response.body)) + String(text); }
      };
    }
  };
  globalThis.getContext = function () { return context; };
  // The `__` shorthand: the collection's calls, with the request and the response (its
  // chainable query API, `__.filter` and the like, is not served).
  globalThis.__ = Object.assign(Object.create(collection), {
    request: context.getRequest(),
    response: context.getResponse()
  });
  globalThis.console = {
    log: function () {
      var parts = [];
      for (var i = 0; i < arguments.length; i++) {
        var part = arguments[i];
        parts.push(typeof part === "string" ? part : JSON.stringify(part));
      }
      if (log.length < 1000) { log.push(parts.join(" ")); }
    }
  };
  globalThis.ErrorCodes = {
    BadRequest: 400, Forbidden: 403, NotFound: 404, Conflict: 409,
    PreconditionFailed: 412, RequestEntityTooLarge: 413, RetryWith: 449, InternalServerError: 500
  };

  return Object.freeze({
    // The host's set up: the collection's link, the operations a run may queue, the request.
    setup: function (json) {
      var given = JSON.parse(json);
      self = given.self;
      limit = given.limit;
      request.body = given.requestBody;
      request.operation = given.operation || "";
      request.headers = given.headers || {};
      response.body = given.responseBody;
    },
    take: function () {
      var out = queued;
      queued = [];
      return JSON.stringify(out);
    },
    deliver: function (id, json) {
      var reply = JSON.parse(json);
      var callback = callbacks[id];
      delete callbacks[id];
      var error;
      if (reply.error) {
        error = new Error(reply.error.message);
        error.number = reply.error.number;
        error.body = reply.error.message;
      }
      if (!callback) {
        if (error) { throw error; }
        return;
      }
      if (reply.kind === "delete") {
        callback(error, reply.options || {});
      } else {
        callback(error, error ? undefined : reply.result, reply.options || {});
      }
    },
    outcome: function () {
      return JSON.stringify({ response: response.body === undefined ? null : response.body, request: request.body === undefined ? null : request.body, log: log.join("\n") });
    }
  });
})();
