// MathJax 3 configuration for the arithmatex markup (pymdownx.arithmatex, generic mode).
// The MathJax files are served from this site (copied from the django-static-mathjax wheel): no network needed.
// noerrors/noundefined are off so that a TeX mistake shows as an error box (and fails the browser test).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
    packages: {"[-]": ["noerrors", "noundefined"]}
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex|md-ellipsis"   // md-ellipsis: headings with math, as the navigation shows them
  },
  startup: {
    pageReady: function () {
      return MathJax.startup.defaultPageReady().then(function () {
        document.documentElement.setAttribute("data-math-typeset", "done");
      });
    }
  }
};
