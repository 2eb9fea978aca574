// The review queue's keyboard, its refresh while the tab is visible, and a selection that survives refreshes.
// Everything here is an enhancement: every page works as plain links and forms without it.
(function () {
  "use strict";

  var REFRESH_SECONDS = 15;
  var selectedId = null;
  var selectedIndex = 0;

  // Refusals (409) and invalid forms (422) carry the reason for the operator: swap them in place.
  function configureHtmx() {
    if (!window.htmx) return;
    window.htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "400", swap: true, error: false },
      { code: "409", swap: true, error: false },
      { code: "413", swap: true, error: false },
      { code: "422", swap: true, error: false },
      { code: "[45]..", swap: false, error: true },
      { code: "...", swap: false }
    ];
  }

  function queueRows() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue-list tr[data-row]"));
  }

  function navItems() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-nav]")).filter(function (el) {
      return el.offsetParent !== null;
    });
  }

  function selectRow(index) {
    var rows = queueRows();
    if (!rows.length) return;
    index = Math.max(0, Math.min(rows.length - 1, index));
    rows.forEach(function (row) {
      row.classList.remove("sel");
      row.removeAttribute("aria-selected");
    });
    var row = rows[index];
    row.classList.add("sel");
    row.setAttribute("aria-selected", "true");
    selectedId = row.getAttribute("data-row");
    selectedIndex = index;
    row.scrollIntoView({ block: "nearest" });
  }

  // After a refresh, keep the same item selected; if it left the queue, the row now in its place.
  function restoreSelection() {
    var rows = queueRows();
    if (!rows.length || selectedId === null) return;
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute("data-row") === selectedId) {
        selectRow(i);
        return;
      }
    }
    selectRow(Math.min(selectedIndex, rows.length - 1));
  }

  function move(delta) {
    var rows = queueRows();
    if (rows.length) {
      selectRow(selectedId === null ? 0 : selectedIndex + delta);
      return;
    }
    var items = navItems();
    if (!items.length) return;
    var current = items.indexOf(document.activeElement);
    var next = current === -1 ? (delta > 0 ? 0 : items.length - 1) : Math.max(0, Math.min(items.length - 1, current + delta));
    items[next].focus({ preventScroll: true });
    items[next].scrollIntoView({ block: "center" });
  }

  function openSelected() {
    var rows = queueRows();
    if (!rows.length || selectedId === null) return false;
    var link = rows[selectedIndex] && rows[selectedIndex].querySelector("a[data-open]");
    if (!link) return false;
    window.location.assign(link.href);
    return true;
  }

  // A draft's outcome asked for with its note still empty: Ctrl+Enter from the note gives it once the note is written.
  var pendingOutcome = null;

  function press(key) {
    var button = document.querySelector('[data-key="' + key + '"]');
    if (!button) return false;
    if (button.hasAttribute("data-needs-note")) {
      var note = button.form && button.form.querySelector("[data-note]");
      if (note && !note.value.trim()) {
        pendingOutcome = button;
        refuseAtNote(note, "Write a note first: it is required to " + button.textContent.trim().split(/\s/)[0].toLowerCase() + ".");
        note.focus();
        return true;
      }
    }
    button.click();
    return true;
  }

  // Says on the note why the key did nothing (the browser's own bubble), until the person types in it.
  function refuseAtNote(note, message) {
    note.setCustomValidity(message);
    note.reportValidity();
    note.addEventListener("input", function clear() {
      note.setCustomValidity("");
      note.removeEventListener("input", clear);
    });
  }

  // The check an answer key answers: the one holding the focus, else the first still unanswered.
  function checks() {
    return Array.prototype.slice.call(document.querySelectorAll("#decide-form [data-check]"));
  }

  function answered(fieldset) {
    return !!fieldset.querySelector("input[type=radio]:checked");
  }

  function currentCheck() {
    var all = checks();
    var focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("[data-check]");
    if (focused && all.indexOf(focused) !== -1) return focused;
    for (var i = 0; i < all.length; i++) if (!answered(all[i])) return all[i];
    return null;
  }

  function markCurrent() {
    var current = currentCheck();
    checks().forEach(function (fieldset) { fieldset.classList.toggle("current", fieldset === current); });
  }

  // Gives the current check the answer whose key is `key`, then moves on: to the next unanswered check, or to the
  // note once every check has its answer.
  function answer(key) {
    var fieldset = currentCheck();
    if (!fieldset) return false;
    var labels = fieldset.querySelectorAll(".choices label");
    for (var i = 0; i < labels.length; i++) {
      var hint = labels[i].querySelector(".kbd");
      if (!hint || hint.textContent.trim() !== key) continue;
      var radio = labels[i].querySelector("input[type=radio]");
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      var next = checks().filter(function (other) { return !answered(other); })[0];
      if (next) next.querySelector("input[type=radio]").focus();
      else {
        var note = document.querySelector("#decide-form [data-note]");
        if (note) note.focus();
      }
      markCurrent();
      return true;
    }
    return false;
  }

  // Ctrl+Enter (or Cmd+Enter) decides from anywhere on the page, the note included: a conversation's answers, or
  // the draft outcome last asked for (approve when none was and the note is empty).
  function submitDecision() {
    var form = document.getElementById("decide-form");
    if (!form) return false;
    var note = form.querySelector("[data-note]");
    var button = pendingOutcome && pendingOutcome.form === form ? pendingOutcome : null;
    if (!button) {
      var primary = form.querySelector('button[data-key="a"]');
      if (form.querySelector("[data-check]") || !note || !note.value.trim()) button = primary;
    }
    if (!button) {
      refuseAtNote(note, "Choose first: r to reject or s to send back with this note (a approves).");
      return true;
    }
    button.click();
    return true;
  }

  function focusEditor() {
    var body = document.querySelector("[data-correction-body]:not([readonly])");
    if (!body) return false;
    body.focus();
    return true;
  }

  function toggleKeys() {
    var dialog = document.getElementById("keys");
    if (!dialog) return;
    if (dialog.open) dialog.close();
    else dialog.showModal();
  }

  function typing(target) {
    if (!target || !target.tagName) return false;
    var tag = target.tagName.toLowerCase();
    if (tag === "input" && (target.type === "radio" || target.type === "checkbox")) return false;
    return tag === "input" || tag === "textarea" || tag === "select" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented) return;
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      // In the draft's editor it checks the edit: it never decides on the draft as it was.
      var editor = event.target.closest ? event.target.closest("[data-correction]") : null;
      if (editor) {
        var check = editor.querySelector("[data-correction-check]");
        if (check) check.click();
        event.preventDefault();
        return;
      }
      if (submitDecision()) event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) return;
    if (event.key.length === 1 && answer(event.key.toLowerCase())) {
      event.preventDefault();
      return;
    }
    var handled = false;
    switch (event.key) {
      case "?": toggleKeys(); handled = true; break;
      case "j": move(1); handled = true; break;
      case "k": move(-1); handled = true; break;
      case "Enter": handled = openSelected(); break;
      case "n": handled = press("n"); break;
      case "a": handled = press("a"); break;
      case "r": handled = press("r"); break;
      case "c": handled = press("c"); break;
      case "d": handled = press("d"); break;
      case "e": handled = focusEditor(); break;
      case "s": handled = press("s"); break;
    }
    if (handled) event.preventDefault();
  });

  // Refresh the list only while the tab is visible (and at once when it becomes visible again).
  function refreshQueue() {
    var list = document.getElementById("queue-list");
    if (!list || !window.htmx || document.visibilityState !== "visible") return;
    window.htmx.trigger(list, "queue-refresh");
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") refreshQueue();
  });

  function start() {
    configureHtmx();
    var list = document.getElementById("queue-list");
    if (list) {
      var seconds = parseInt(list.getAttribute("data-refresh-seconds"), 10) || REFRESH_SECONDS;
      window.setInterval(refreshQueue, seconds * 1000);
      selectRow(0);
    }
    document.body.addEventListener("htmx:afterSettle", function () {
      restoreSelection();
      markCurrent();
    });
    document.addEventListener("focusin", markCurrent);
    markCurrent();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
