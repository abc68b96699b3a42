// The audit timeline's live tail, the pages' only script: every 5 s the same page is read
// again and its list of records put in place of this one (no reload: the page keeps its
// scroll, and a record's details stay open if they were). Without scripts the page still
// works; it is simply not followed.
(function () {
  "use strict";
  var list = document.querySelector("ol.timeline");
  if (!list) {
    return;
  }
  setInterval(function () {
    fetch(location.href, { credentials: "same-origin" })
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (!html) {
          return;
        }
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("ol.timeline");
        if (fresh) {
          list.querySelectorAll("li[id] details[open]").forEach(function (open) {
            var same = fresh.querySelector("#" + CSS.escape(open.closest("li").id) + " details");
            if (same) {
              same.open = true;
            }
          });
          list.replaceWith(fresh);
          list = fresh;
        }
      })
      .catch(function () {});
  }, 5000);
})();
