"""Training an intent classifier: the run, stage by stage (:mod:`.pipeline`; its multi-label
branch, :mod:`.compound`), the recipe by part (:mod:`.recipe`), building the model
(:mod:`.builders`; the measured defaults of each architecture and encoder family,
:mod:`.defaults`), the rows (:mod:`.data`) and the losses (:mod:`.losses`), and the
levers: LP-FT (:mod:`.linear_probe`), masked-LM self-pretraining (:mod:`.pretrain`), label cleaning
(:mod:`.cleaning`), TF-IDF model selection (:mod:`.tfidf_selection`), vocabulary trimming
(:mod:`.trimming`), the TF-IDF blend (:mod:`.blending`), label-keeping noise
(:mod:`.augmentation`) and distillation into a student (:mod:`.distillation`; its teacher,
:mod:`.teacher`); and the warm start from a saved model, its grown head and vocabulary and
its lineage (:mod:`.warm_start`)."""
