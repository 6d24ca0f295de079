//! A one-shot result from one of the GPU's callbacks (a buffer mapped, the queue's work done),
//! as a future. wgpu calls the callback natively from `device.poll` and in the browser from
//! its event loop; either way whoever awaits the signal is woken then. Clones share one slot,
//! so the engine can keep one while the page awaits another.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::GpuError;

#[derive(Clone, Default)]
pub struct Signal(Arc<Mutex<Slot>>);

#[derive(Default)]
struct Slot {
    result: Option<Result<(), GpuError>>,
    wakers: Vec<Waker>,
}

impl Signal {
    /// Fires the signal (the first result counts) and wakes everyone awaiting it.
    pub fn complete(&self, result: Result<(), GpuError>) {
        let wakers = match self.0.lock() {
            Ok(mut slot) if slot.result.is_none() => {
                slot.result = Some(result);
                std::mem::take(&mut slot.wakers)
            }
            _ => return,
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    /// The result, once fired.
    pub fn result(&self) -> Option<Result<(), GpuError>> {
        match self.0.lock() {
            Ok(slot) => slot.result.clone(),
            Err(_) => Some(Err(GpuError::Failed("a GPU callback panicked".into()))),
        }
    }
}

impl Future for Signal {
    type Output = Result<(), GpuError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut slot) = self.0.lock() else {
            return Poll::Ready(Err(GpuError::Failed("a GPU callback panicked".into())));
        };
        match &slot.result {
            Some(result) => Poll::Ready(result.clone()),
            None => {
                if !slot.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    slot.wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}
