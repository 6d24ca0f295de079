//! A small command-line parser: one positional MODEL, `--name value` options and switches.

use std::collections::HashMap;

use inferno::model::{AttentionPrecision, KvType, KvTypes};

/// What `--device` takes.
const DEVICES: &str = "--device takes cpu, gpu, gpu-q8 or gpu-float";

pub struct Args {
    command: &'static str,
    positional: Vec<String>,
    values: HashMap<&'static str, Vec<String>>,
    switches: Vec<&'static str>,
}

impl Args {
    /// `options` take a value (`--temp 0.7` or `--temp=0.7`); `switches` do not.
    pub fn parse(
        command: &'static str,
        args: &[String],
        options: &[&'static str],
        switches: &[&'static str],
    ) -> Result<Args, String> {
        let mut parsed =
            Args { command, positional: Vec::new(), values: HashMap::new(), switches: Vec::new() };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            // `--name` and short `-n`; a lone `-` or `--` is positional.
            if !arg.starts_with('-') || arg.len() < 2 || arg == "--" {
                parsed.positional.push(arg.clone());
                continue;
            }
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            if let Some(&switch) = switches.iter().find(|&&s| s == name) {
                if inline.is_some() {
                    return Err(format!("{command}: {name} takes no value"));
                }
                parsed.switches.push(switch);
            } else if let Some(&option) = options.iter().find(|&&o| o == name) {
                let value = match inline {
                    Some(value) => value,
                    None => rest.next().ok_or_else(|| format!("{command}: {name} needs a value"))?.clone(),
                };
                parsed.values.entry(option).or_default().push(value);
            } else {
                return Err(format!("{command}: unknown option {name}"));
            }
        }
        Ok(parsed)
    }

    /// The single positional argument, the model file.
    pub fn model(&self) -> Result<&str, String> {
        match self.positional.as_slice() {
            [path] => Ok(path),
            [] => Err(format!("{}: missing MODEL.gguf", self.command)),
            [_, extra, ..] => Err(format!("{}: unexpected argument {extra:?}", self.command)),
        }
    }

    /// MODEL and the positional arguments after it (`embed MODEL TEXT...`).
    pub fn model_and_rest(&self) -> Result<(&str, &[String]), String> {
        match self.positional.split_first() {
            Some((model, rest)) => Ok((model, rest)),
            None => Err(format!("{}: missing MODEL.gguf", self.command)),
        }
    }

    pub fn switch(&self, name: &str) -> bool {
        self.switches.contains(&name)
    }

    /// An option's value (the last one, if it was given more than once).
    pub fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).and_then(|values| values.last()).map(String::as_str)
    }

    /// Every value of an option that may be given more than once (`--stop A --stop B`).
    pub fn texts(&self, name: &str) -> impl Iterator<Item = &str> {
        self.values.get(name).into_iter().flatten().map(String::as_str)
    }

    /// `--threads N` (default: the machine's cores, capped): starts the pool that matmuls and
    /// attention split their work across, and returns its size.
    pub fn start_threads(&self) -> Result<usize, String> {
        let threads = self.number("--threads", inferno::parallel::default_threads())?;
        inferno::parallel::start_pool(threads).map_err(|e| format!("{}: {e}", self.command))?;
        Ok(threads)
    }

    /// `--device gpu` opens the GPU (wgpu: Vulkan, Metal or DX12) as the engine sets it up,
    /// `--device gpu-q8` and `--device gpu-float` with its decode products' inputs as 8 bits
    /// for integer dot products or as floats (`Gpu::set_integer_dots`; the default is 8 bits
    /// wherever WGSL has `dot4I8Packed`), `--device cpu` or none means the CPU; a build without
    /// the `gpu` feature says how to get one.
    #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
    pub fn gpu(&self) -> Result<Option<std::sync::Arc<inferno::gpu::Gpu>>, String> {
        let q8 = match self.text("--device") {
            None | Some("cpu") => return Ok(None),
            Some("gpu") => None,
            Some("gpu-q8") => Some(true),
            Some("gpu-float") => Some(false),
            Some(other) => return Err(format!("{}: {DEVICES}, not {other:?}", self.command)),
        };
        let gpu = inferno::gpu::Gpu::new().map_err(|e| format!("{}: {e}", self.command))?;
        if let Some(q8) = q8 {
            if q8 && !gpu.facts().packed_dots {
                return Err(format!("{}: this adapter's WGSL has no dot4I8Packed for gpu-q8", self.command));
            }
            gpu.set_integer_dots(q8);
        }
        Ok(Some(std::sync::Arc::new(gpu)))
    }

    /// Without the `gpu` feature only the CPU exists.
    #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
    pub fn gpu(&self) -> Result<(), String> {
        match self.text("--device") {
            None | Some("cpu") => Ok(()),
            Some("gpu" | "gpu-q8" | "gpu-float") => Err(format!(
                "{}: this build has no GPU backend (cargo build --release --features gpu)",
                self.command
            )),
            Some(other) => Err(format!("{}: {DEVICES}, not {other:?}", self.command)),
        }
    }

    /// The engine `load` gives, with attention at `--precision` (`default` when absent), its
    /// caches kept as `--cache-type-k`/`--cache-type-v` ask, and its sessions on the device
    /// `--device` asks for (the CPU by default). The options are checked before it loads.
    pub fn configure(
        &self,
        default: AttentionPrecision,
        load: impl FnOnce() -> Result<inferno::engine::Engine, String>,
    ) -> Result<inferno::engine::Engine, String> {
        let (precision, cache_types) = (self.precision(default)?, self.cache_types()?);
        #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
        let gpu = self.gpu()?;
        #[cfg(not(all(feature = "gpu", not(target_family = "wasm"))))]
        self.gpu()?;
        let mut engine = load()?;
        engine.set_attention_precision(precision);
        engine.set_cache_types(cache_types).map_err(|e| format!("{}: {e}", self.command))?;
        #[cfg(all(feature = "gpu", not(target_family = "wasm")))]
        engine.use_gpu(gpu).map_err(|e| format!("{}: {e}", self.command))?;
        Ok(engine)
    }

    /// `--precision exact|fast`: how attention on the CPU keeps its query and `Σ p·V` (llama.cpp's
    /// F16, or f32), `default` when absent.
    pub fn precision(&self, default: AttentionPrecision) -> Result<AttentionPrecision, String> {
        match self.text("--precision") {
            None => Ok(default),
            Some(name) => AttentionPrecision::from_name(name)
                .ok_or_else(|| format!("{}: --precision takes exact or fast, not {name:?}", self.command)),
        }
    }

    /// `--cache-type-k` and `--cache-type-v` (llama.cpp's `-ctk`/`-ctv`): `f16` (the default),
    /// `q8_0` or `f32`.
    pub fn cache_types(&self) -> Result<KvTypes, String> {
        let kind = |option: &str| match self.text(option) {
            None => Ok(KvType::F16),
            Some(name) => KvType::from_name(name)
                .ok_or_else(|| format!("{}: {option} takes f16, q8_0 or f32, not {name:?}", self.command)),
        };
        Ok(KvTypes { keys: kind("--cache-type-k")?, values: kind("--cache-type-v")? })
    }

    /// A numeric option, `default` when absent; a value that does not parse is an error.
    pub fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.text(name) {
            None => Ok(default),
            Some(text) => text
                .trim()
                .parse()
                .map_err(|_| format!("{}: {name} {text:?} is not a valid number", self.command)),
        }
    }
}
