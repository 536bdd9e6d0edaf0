// The dashboard's live parts. Every page works without this file; it only refreshes
// numbers while one watches. It runs under a CSP without inline script: elements name
// what to poll in data- attributes.
"use strict";

// <element data-poll="/app/...json" data-poll-ms="1000">: fetches the URL and puts each
// field of the JSON answer into the descendant with data-field="<name>". Stops when the
// answer has "done": true.
function poll(el) {
  const url = el.dataset.poll;
  const every = Number(el.dataset.pollMs || 1000);
  const tick = async () => {
    let done = false;
    try {
      const res = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (res.ok) {
        const data = await res.json();
        for (const [name, value] of Object.entries(data)) {
          el.querySelectorAll('[data-field="' + name + '"]').forEach((target) => {
            if (target.tagName === "PROGRESS") { target.value = Number(value); }
            else { target.textContent = String(value); }
          });
        }
        done = data.done === true;
        el.dataset.state = done ? "done" : "polling";
      }
    } catch (_) { /* the next tick tries again */ }
    if (!done) { setTimeout(tick, every); }
  };
  tick();
}

// <form data-live="/app/...">: on input, posts the form (its CSRF token included) to
// the URL after a short pause and shows the answer's fields like poll does.
function live(form) {
  const url = form.dataset.live;
  const target = document.getElementById(form.dataset.liveTarget);
  let timer = null;
  const send = async () => {
    const body = new URLSearchParams(new FormData(form));
    try {
      const res = await fetch(url, { method: "POST", body, credentials: "same-origin", headers: { Accept: "application/json" } });
      const data = await res.json();
      for (const [name, value] of Object.entries(data)) {
        target.querySelectorAll('[data-field="' + name + '"]').forEach((t) => {
          if (t.tagName === "IFRAME") { t.srcdoc = String(value); }
          else { t.textContent = String(value); }
        });
      }
      target.dataset.state = res.ok ? "ok" : "error";
    } catch (_) { target.dataset.state = "error"; }
  };
  form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(send, 300); });
  form.addEventListener("change", () => { clearTimeout(timer); timer = setTimeout(send, 50); });
  send();
}

// Copy buttons: <button data-copy="text">.
function copy(button) {
  button.hidden = false;
  button.addEventListener("click", () => {
    navigator.clipboard.writeText(button.dataset.copy).then(() => { button.textContent = "Copied"; });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-poll]").forEach(poll);
  document.querySelectorAll("form[data-live]").forEach(live);
  document.querySelectorAll("button[data-copy]").forEach(copy);
});

// <form data-upload="/app/...">: shown only with script; sends the picked file as
// text/csv with the form's CSRF token in a header, then opens the page it answers.
function upload(form) {
  form.hidden = false;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const file = form.querySelector("input[type=file]").files[0];
    if (!file) { return; }
    const token = form.querySelector("input[name=csrf]").value;
    const res = await fetch(form.dataset.upload, {
      method: "POST", body: file, credentials: "same-origin",
      headers: { "Content-Type": "text/csv", "X-CSRF-Token": token, Accept: "application/json" },
    });
    if (res.ok) {
      const data = await res.json();
      window.location.assign(data.location);
    } else {
      const p = document.createElement("p");
      p.className = "error";
      p.setAttribute("role", "alert");
      p.textContent = "The import was refused (" + res.status + "). " + (await res.text()).slice(0, 500);
      form.append(p);
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("form[data-upload]").forEach(upload);
});
