// Debiased exponential moving average, as W&B and TensorBoard smooth:
//   s_t = a * s_{t-1} + (1 - a) * x_t,   shown as s_t / (1 - a^n)   (n = finite points seen so far)
// The debiasing stops the curve starting near zero. A null (NaN, inf or missing) point stays a gap
// and does not move the average.
window.EchoSmoothing = {
  ema: function (values, weight) {
    if (!(weight > 0)) return values.slice();
    let sum = 0;
    let n = 0;
    return values.map(function (x) {
      if (x === null || !Number.isFinite(x)) return null;
      sum = weight * sum + (1 - weight) * x;
      n += 1;
      return sum / (1 - Math.pow(weight, n));
    });
  },
};
