//! The word-count dataset: seeded text, 12 words a line, from a 100,000-word vocabulary
//! with Zipf-like frequencies (the word of rank r drawn with weight 1/(r+1)). Two
//! vocabularies: `plain`, words of 2 to 11 letters whatever their rank (about 7.5 bytes
//! a word with its separator), and `dense`, where the most frequent words are the
//! shortest, as in real text (Zipf's law of abbreviation): the 26 most frequent have one
//! letter, the next 676 two, the next 17,576 three, the rest four — about 3.2 bytes a
//! word, 200 MB holding about 62 M words.

#![allow(dead_code)] // each example uses part of it

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Words in the vocabulary.
pub(crate) const VOCABULARY: usize = 100_000;
/// Words per line.
pub(crate) const WORDS_PER_LINE: usize = 12;

/// A splitmix64 stream.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The vocabulary: distinct lowercase words of 2 to 11 letters, most frequent first.
pub(crate) fn vocabulary(seed: u64) -> Vec<String> {
    let mut rng = Rng(seed ^ 0x5eed);
    let mut seen = std::collections::HashSet::new();
    let mut words = Vec::with_capacity(VOCABULARY);
    while words.len() < VOCABULARY {
        let len = 2 + (rng.next() % 10) as usize;
        let w: String = (0..len).map(|_| (b'a' + (rng.next() % 26) as u8) as char).collect();
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    words
}

/// The dense vocabulary: every word of 1, then 2, 3 and 4 letters in turn (shortest
/// first, so the most frequent are the shortest), each length's words in a seeded order.
pub(crate) fn dense_vocabulary(seed: u64) -> Vec<String> {
    let mut rng = Rng(seed ^ 0xde45e);
    let mut words = Vec::with_capacity(VOCABULARY);
    let mut len = 1u32;
    while words.len() < VOCABULARY {
        let count = 26usize.pow(len);
        let mut class: Vec<String> = (0..count)
            .map(|mut i| {
                let mut w = vec![b'a'; len as usize];
                for c in w.iter_mut().rev() {
                    *c = b'a' + (i % 26) as u8;
                    i /= 26;
                }
                String::from_utf8(w).expect("ascii")
            })
            .collect();
        for i in (1..class.len()).rev() {
            class.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        words.extend(class.into_iter().take(VOCABULARY - words.len()));
        len += 1;
    }
    words
}

/// Which vocabulary generated text draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Vocabulary {
    /// Words of 2 to 11 letters, whatever their frequency.
    Plain,
    /// The most frequent words the shortest (1 to 4 letters).
    Dense,
}

/// Writes about `bytes` bytes of text (whole lines) to `path`.
pub(crate) fn generate(
    path: &Path,
    bytes: u64,
    seed: u64,
    vocabulary_of: Vocabulary,
) -> std::io::Result<()> {
    let words = match vocabulary_of {
        Vocabulary::Plain => vocabulary(seed),
        Vocabulary::Dense => dense_vocabulary(seed),
    };
    let mut cumulative = Vec::with_capacity(VOCABULARY);
    let mut total = 0.0;
    for r in 0..VOCABULARY {
        total += 1.0 / (r + 1) as f64;
        cumulative.push(total);
    }
    let mut rng = Rng(seed);
    let tmp = path.with_extension("partial");
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    let mut written = 0u64;
    let mut line = Vec::with_capacity(256);
    while written < bytes {
        line.clear();
        for i in 0..WORDS_PER_LINE {
            let u = rng.unit() * total;
            let r = cumulative.partition_point(|&c| c < u).min(VOCABULARY - 1);
            if i > 0 {
                line.push(b' ');
            }
            line.extend_from_slice(words[r].as_bytes());
        }
        line.push(b'\n');
        out.write_all(&line)?;
        written += line.len() as u64;
    }
    out.flush()?;
    drop(out);
    std::fs::rename(tmp, path)
}

/// The word-count examples' input flags.
#[derive(Debug, clap::Args)]
pub(crate) struct TextInput {
    /// Text file to count (words separated by whitespace).
    #[arg(long, conflicts_with = "generate")]
    pub(crate) input: Option<PathBuf>,
    /// Generate the input (about --megabytes of text) instead; kept in the temp directory.
    #[arg(long)]
    pub(crate) generate: bool,
    /// Seed of the generated text.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Size of the generated text.
    #[arg(long, default_value_t = 200)]
    pub(crate) megabytes: u64,
    /// The generated text's words: `plain` (2 to 11 letters) or `dense` (the most
    /// frequent the shortest, 1 to 4 letters: twice the words in as many bytes).
    #[arg(long, value_enum, default_value_t = Vocabulary::Plain)]
    pub(crate) text: Vocabulary,
    /// Write the counts here as `word<TAB>count` part files.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Skip the check against a single-threaded count.
    #[arg(long)]
    pub(crate) no_verify: bool,
}

impl TextInput {
    /// The input file: `--input`, or the generated text (made by rank 0 if missing;
    /// every worker waits for it).
    pub(crate) fn resolve(
        &self,
        comm: &heddle::Communicator,
    ) -> Result<PathBuf, Box<dyn std::error::Error>> {
        let path = match (&self.input, self.generate) {
            (Some(path), _) => path.clone(),
            (None, true) => {
                let dense = if self.text == Vocabulary::Dense { "-dense" } else { "" };
                let path = std::env::temp_dir().join(format!(
                    "heddle-words{dense}-{}mb-seed{}.txt",
                    self.megabytes, self.seed
                ));
                if comm.rank() == 0 && !path.exists() {
                    generate(&path, self.megabytes << 20, self.seed, self.text)?;
                }
                comm.barrier()?;
                path
            }
            (None, false) => return Err("give --input FILE or --generate".into()),
        };
        if !path.exists() {
            return Err(format!("--input {} does not exist", path.display()).into());
        }
        Ok(path)
    }
}
