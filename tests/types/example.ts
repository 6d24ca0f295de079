// The README's embedding example, type-checked against www/inferno.d.ts by `tsc --noEmit`
// (./build.sh test). Uses every part of the public API once.
import { Inferno, InfernoError, type ModelInfo } from '../../www/inferno.js';

export async function demo(file: File, output: HTMLElement): Promise<void> {
  const engine = await Inferno.load(file, {
    threads: Inferno.capabilities().defaultThreads,
    onProgress: ({ phase, loaded, total }) => console.log(phase, loaded / total),
  });
  const model: ModelInfo | null = engine.model;
  console.log(model?.architecture, model?.context_length, model?.recommended_sampling.temperature);

  const controller = new AbortController();
  const stream = await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'Write a haiku about embers.' }],
    stream: true,
    max_tokens: 64,
    temperature: 0.7,
    logprobs: true,
    top_logprobs: 3,
    stop: ['\n\n'],
    signal: controller.signal,
  });
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    output.textContent += choice.delta.content ?? '';
    const step = chunk.inferno?.step;
    if (step?.trace)
      console.log(
        step.piece,
        step.trace.nucleus_size,
        step.trace.entropy_bits,
        choice.logprobs?.content[0].top_logprobs,
      );
    if (choice.finish_reason)
      console.log(choice.finish_reason, chunk.usage?.completion_tokens, chunk.inferno?.stats?.decodeTokS);
  }

  // Regenerate from the third token with the runner-up candidate forced there.
  const branched = await engine.branch({ step: 2, token: 42, max_tokens: 64 });
  console.log(branched.choices[0].message.content, branched.inferno.steps.length);

  const ids: number[] = await engine.tokenize('Hello', { addSpecial: false });
  const text: string = await engine.detokenize(ids);
  const { report } = await engine.inspect();
  console.log(text, Object.keys(report), (await engine.engineInfo()).defaults.sampling.top_k);

  try {
    await engine.chat.completions.create({ messages: [], stream: false });
  } catch (error) {
    if (error instanceof InfernoError) console.log(error.kind, error.message);
  }
  for (const stored of await Inferno.storedModels.list()) console.log(stored.name, stored.size);
  await engine.unload();
  engine.terminate();
}
