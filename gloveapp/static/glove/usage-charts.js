// The admin's usage charts: the data the page carries (json_script), drawn by Chart.js
// (vendored, no CDN). Each chart marks itself drawn (data-drawn) for the browser test.
(function () {
  "use strict";
  var source = document.getElementById("usage-data");
  if (!source || typeof window.Chart === "undefined") return;
  var data = JSON.parse(source.textContent);
  var palette = ["#7b5ea7", "#3f8f5f", "#d08a2e", "#c0392b", "#6d8fb3", "#8a8a8a", "#2e86c1"];
  Object.keys(data.charts).forEach(function (key) {
    var chart = data.charts[key];
    var canvas = document.getElementById("chart-" + key);
    if (!canvas) return;
    var datasets = chart.datasets.map(function (set, index) {
      var colour = palette[index % palette.length];
      return {
        label: set.label,
        data: set.data,
        backgroundColor: colour,
        borderColor: colour,
        spanGaps: true,
      };
    });
    var drawn = new window.Chart(canvas, {
      type: chart.type,
      data: { labels: data.days, datasets: datasets },
      options: {
        animation: false,
        responsive: true,
        scales: {
          x: { stacked: !!chart.stacked },
          y: { stacked: !!chart.stacked, beginAtZero: true, title: { display: true, text: chart.unit } },
        },
      },
    });
    canvas.closest("[data-chart]").dataset.drawn = String(drawn.data.datasets.length);
  });
})();
