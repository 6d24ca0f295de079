self.onmessage = () => self.postMessage('hi');
