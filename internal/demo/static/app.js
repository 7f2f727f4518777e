// The browser side of the cookie flow. The tokens stay in HttpOnly
// cookies; the CSRF token (no credential on its own) is kept in the tab's
// sessionStorage so a reload can still log out.
"use strict";

let csrf = sessionStorage.getItem("csrf") || "";

function setCSRF(v) {
  csrf = v || "";
  if (csrf) sessionStorage.setItem("csrf", csrf); else sessionStorage.removeItem("csrf");
}

const $ = (id) => document.getElementById(id);

function show(status) {
  $("status").textContent = status;
  $("cookies").textContent = document.cookie === "" ? "(none)" : document.cookie;
}

async function call(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET" && csrf !== "") {
    init.headers["X-CSRF-Token"] = csrf;
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  return { status: res.status, json };
}

function credentials() {
  return { email: $("email").value, password: $("password").value, device_id: "demo-browser", device_name: "Browser demo" };
}

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const r = await call("POST", "/v1/login", credentials());
  if (r.status === 200) {
    setCSRF(r.json.csrf_token);
    show("logged in (session " + r.json.session_id + ")");
  } else {
    show("login failed: " + r.status + " " + (r.json && r.json.code));
  }
});

$("register-button").addEventListener("click", async () => {
  const { email, password } = credentials();
  const r = await call("POST", "/v1/register", { email, password });
  show(r.status === 201 ? "registered " + r.json.email : "register failed: " + r.status + " " + (r.json && r.json.code));
});

$("whoami-button").addEventListener("click", async () => {
  const r = await call("GET", "/v1/me");
  $("whoami").textContent = r.status === 200 ? JSON.stringify(r.json, null, 2) : r.status + " " + (r.json && r.json.code);
  show($("status").textContent);
});

$("refresh-button").addEventListener("click", async () => {
  const r = await call("POST", "/v1/refresh");
  if (r.status === 200) setCSRF(r.json.csrf_token);
  show(r.status === 200 ? "refreshed" : "refresh failed: " + r.status + " " + (r.json && r.json.code));
});

$("logout-button").addEventListener("click", async () => {
  const r = await call("POST", "/v1/logout");
  if (r.status === 204) setCSRF("");
  $("whoami").textContent = "-";
  show(r.status === 204 ? "logged out" : "logout failed: " + r.status + " " + (r.json && r.json.code));
});

show("ready");
