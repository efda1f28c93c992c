// The context map's script (no build step, no dependency).
//
// A page holds one part (#part): an HTML fragment the service renders. When the service wants
// an API key, the key is asked for once, kept in this tab's sessionStorage and sent as an
// Authorization header; it never goes into a URL. A page that follows a session (data-events)
// reads its Server-Sent Events with fetch (EventSource cannot send a header), resumes with
// Last-Event-ID after a drop, and loads the part again after every durable update.
(function () {
  "use strict";

  var KEY = "ctxsvc.apiKey";
  var part = document.getElementById("part");
  if (!part) return;
  var form = document.getElementById("key-form");
  var forget = document.getElementById("forget-key");
  var live = document.getElementById("live");

  var last = null; // id of the last durable update the page has seen
  var loading = null; // the load in flight
  var again = false; // an update arrived while loading: load once more after it
  var following = false;
  var stopped = false;
  var stream = null; // AbortController of the event stream

  function storedKey() {
    try {
      return window.sessionStorage.getItem(KEY);
    } catch (e) {
      return null;
    }
  }

  function headers(extra) {
    var h = Object.assign({}, extra || {});
    var key = storedKey();
    if (key) h["Authorization"] = "Bearer " + key;
    return h;
  }

  function setLive(state, text) {
    if (!live) return;
    live.hidden = false;
    live.dataset.state = state;
    live.textContent = text;
  }

  function askForKey(message) {
    stopped = true;
    if (stream) stream.abort();
    if (!form) return;
    try {
      window.sessionStorage.removeItem(KEY);
    } catch (e) {
      /* storage unavailable: nothing kept */
    }
    form.hidden = false;
    if (forget) forget.hidden = true;
    var error = document.getElementById("key-error");
    if (error) {
      error.hidden = !message;
      error.textContent = message || "";
    }
    part.replaceChildren();
    var input = document.getElementById("api-key");
    if (input) input.focus();
  }

  function showProblem(status, text) {
    var detail = "The service answered " + status + ".";
    try {
      var problem = JSON.parse(text);
      if (problem && problem.detail) detail = problem.detail;
    } catch (e) {
      /* not a problem document */
    }
    var section = document.createElement("section");
    section.className = "problem";
    var title = document.createElement("h1");
    title.textContent = "Error " + status;
    var body = document.createElement("p");
    body.textContent = detail;
    section.append(title, body);
    part.replaceChildren(section);
  }

  // The keys of the expanded rows (and their JSON views), to expand them again after a load.
  function expanded() {
    var open = [];
    part.querySelectorAll("details[open]").forEach(function (details) {
      var row = details.closest("[data-key]");
      if (row) open.push(row.dataset.key + (details.classList.contains("sent") ? "/sent" : ""));
    });
    return open;
  }

  function expand(open) {
    part.querySelectorAll("details").forEach(function (details) {
      var row = details.closest("[data-key]");
      if (!row) return;
      var key = row.dataset.key + (details.classList.contains("sent") ? "/sent" : "");
      if (open.indexOf(key) >= 0) details.open = true;
    });
  }

  function fetchPart() {
    var open = expanded();
    return fetch(part.dataset.part, {
      headers: headers({ Accept: "text/html" }),
      cache: "no-store",
      credentials: "omit",
    }).then(function (response) {
      if (response.status === 401) {
        askForKey("The service refused that API key.");
        return;
      }
      return response.text().then(function (text) {
        if (!response.ok) {
          showProblem(response.status, text);
          return;
        }
        part.innerHTML = text;
        part.dataset.loaded = "true";
        expand(open);
        if (form) form.hidden = true;
        if (forget) forget.hidden = !storedKey();
      });
    });
  }

  // Load the part; loads asked for meanwhile are folded into one more load after it.
  function load() {
    if (loading) {
      again = true;
      return loading;
    }
    loading = fetchPart()
      .catch(function () {
        setLive("offline", "The service cannot be reached");
      })
      .then(function () {
        loading = null;
        if (again && !stopped) {
          again = false;
          return load();
        }
      });
    return loading;
  }

  function wait(ms) {
    return new Promise(function (resolve) {
      window.setTimeout(resolve, ms);
    });
  }

  // Reads one SSE response; every durable update (one with an id) means the part changed.
  function read(body) {
    var reader = body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    var id = null;
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true });
        var end;
        while ((end = buffer.indexOf("\n")) >= 0) {
          var line = buffer.slice(0, end);
          buffer = buffer.slice(end + 1);
          if (line.endsWith("\r")) line = line.slice(0, -1);
          if (line === "") {
            if (id !== null) {
              last = Number(id);
              load();
            }
            id = null;
          } else if (line.slice(0, 3) === "id:") {
            id = line.slice(3).trim();
          }
        }
        return pump();
      });
    }
    return pump();
  }

  function follow() {
    var url = part.dataset.events;
    if (!url || following) return;
    following = true;
    var delay = 500;
    function connect() {
      if (stopped) {
        following = false;
        return;
      }
      var h = headers({ Accept: "text/event-stream" });
      if (last !== null) h["Last-Event-ID"] = String(last);
      stream = new AbortController();
      fetch(url, { headers: h, cache: "no-store", credentials: "omit", signal: stream.signal })
        .then(function (response) {
          if (response.status === 401) {
            askForKey("The service refused that API key.");
            return;
          }
          if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
          setLive("live", "Live");
          delay = 500;
          return read(response.body);
        })
        .catch(function () {
          /* dropped: reconnect below */
        })
        .then(function () {
          if (stopped) {
            following = false;
            return;
          }
          setLive("reconnecting", "Reconnecting…");
          return wait(delay).then(function () {
            delay = Math.min(delay * 2, 5000);
            connect();
          });
        });
    }
    connect();
  }

  // Follow from the update the part was rendered at (nothing before it is replayed).
  function start() {
    var map = part.querySelector("[data-last-event]");
    if (map && last === null) last = Number(map.dataset.lastEvent);
    if (map) follow();
  }

  if (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var input = document.getElementById("api-key");
      var key = input ? input.value.trim() : "";
      if (!key) return;
      try {
        window.sessionStorage.setItem(KEY, key);
      } catch (e) {
        /* storage unavailable: this load only */
      }
      if (input) input.value = "";
      stopped = false;
      load().then(start);
    });
  }
  if (forget) {
    forget.addEventListener("click", function () {
      askForKey("");
    });
  }

  if (part.dataset.loaded === "true") {
    if (forget) forget.hidden = !storedKey();
    start();
  } else if (form && !storedKey()) {
    askForKey("");
  } else {
    load().then(start);
  }
})();
