// gpuyard portal: the little the pages need beyond htmx.
// - forms with data-confirm ask before they are sent (cancel);
// - a log follows its end while the reader has not scrolled up.
(function () {
  "use strict";
  var follow = true;

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  }, true);

  function stick() {
    var log = document.querySelector("#log pre[data-follow]");
    if (!log) return;
    if (follow) log.scrollTop = log.scrollHeight;
    log.addEventListener("scroll", function () {
      follow = log.scrollTop + log.clientHeight >= log.scrollHeight - 24;
    });
  }
  document.addEventListener("DOMContentLoaded", stick);
  document.addEventListener("htmx:afterSettle", stick);
})();
