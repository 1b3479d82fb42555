// Plotly options shared by every chart: fit the container, no Plotly logo, and no "Share chart"
// button (it uploads to Plotly's cloud, which a self-hosted install neither has nor may reach).
window.EchoChartConfig = Object.freeze({ responsive: true, displaylogo: false, showSendToCloud: false });
