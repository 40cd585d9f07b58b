// Typesets the formulas of pymdownx.arithmatex (generic mode) with the KaTeX copy shipped in javascripts/katex/,
// so the pages need no network. Arithmatex wraps inline math as <span class="arithmatex">\(...\)</span> and
// display math as <div class="arithmatex">\[...\]</div>.
function renderArithmatex(root) {
  root.querySelectorAll(".arithmatex").forEach((element) => {
    const source = element.textContent.trim();
    const display = source.startsWith("\\[");
    const tex = source.replace(/^\\[[(]/, "").replace(/\\[\])]$/, "");
    katex.render(tex, element, { displayMode: display, throwOnError: false });
  });
}

if (typeof document$ !== "undefined") {
  document$.subscribe(({ body }) => renderArithmatex(body)); // Material's instant navigation
} else {
  document.addEventListener("DOMContentLoaded", () => renderArithmatex(document.body));
}
