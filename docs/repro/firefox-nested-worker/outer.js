// A dedicated worker that, when asked, starts a nested worker and says so before and after the
// constructor. In headless Firefox 153 the constructor now and then never returns: 'before'
// arrives, 'after' never does, and this worker runs nothing more (not even its timers).
self.onmessage = ({ data }) => {
  self.postMessage('before');
  const inner = new Worker(new URL('./inner.js', import.meta.url), { type: data.type });
  self.postMessage('after');
  inner.onmessage = () => self.postMessage('inner ran');
  inner.postMessage('hello');
};
